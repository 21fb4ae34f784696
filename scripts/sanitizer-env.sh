# Sourced by the scripts that run zt built with -DZT_SANITIZE=address,undefined
# (scripts/test-sanitize.sh, scripts/fuzz-replay.sh): the runtime options every process they start
# inherits (the trainer's ranks, zt_comm_check, the corpus replays). LibTorch is not instrumented.
# use_tls=0: GCC 12's LeakSanitizer crashes ("Tracer caught signal 11") reading the thread-local
# storage of dlopen'ed libraries on Debian 12's glibc, so TLS is not scanned; that can only add
# reports, never hide one, and the few it adds (buffers third-party libraries keep per thread)
# are suppressed by library name in scripts/sanitize.supp.
zt_scripts_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-use_tls=0:suppressions=$zt_scripts_dir/sanitize.supp:print_suppressions=0}
