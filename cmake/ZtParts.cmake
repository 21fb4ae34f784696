# The optional parts of a build: what a configure step builds only where something is installed.
# Each part declares itself where it is decided; the configure step writes them all to
# <build>/zt-optional-parts.tsv, which scripts/check-optional-parts.sh reads (a `unit` test, and
# the reason a part that scripts/setup.sh installs for must never be missing after it ran).
#
#   zt_optional_part(NAME BUILT <bool> NEEDS "<what it needs>" [DEVICE])
# DEVICE: needs what no Debian package of this project's machines gives (a GPU machine's CUDA
# LibTorch, scripts/device-build.sh), so its absence here is not a fault.
include_guard(GLOBAL)

function(zt_optional_part name)
  cmake_parse_arguments(arg "DEVICE" "BUILT;NEEDS" "" ${ARGN})
  set(state missing)
  if(arg_BUILT)
    set(state built)
  endif()
  set(provider setup)
  if(arg_DEVICE)
    set(provider device)
  endif()
  set_property(GLOBAL APPEND PROPERTY ZT_OPTIONAL_PARTS "${name}\t${state}\t${provider}\t${arg_NEEDS}")
endfunction()

# Called once, at the end of the top-level CMakeLists.txt.
function(zt_write_optional_parts)
  get_property(parts GLOBAL PROPERTY ZT_OPTIONAL_PARTS)
  string(REPLACE ";" "\n" lines "${parts}")
  file(WRITE ${PROJECT_BINARY_DIR}/zt-optional-parts.tsv "part\tstate\tprovided by\tneeds\n${lines}\n")
endfunction()
