#include "zt/host/environment_block.h"

#include <cstring>

namespace zt {

const char* environment_entry_value(const char* entry, const char* name) {
  const size_t n = std::strlen(name);
  return std::strncmp(entry, name, n) == 0 && entry[n] == '=' ? entry + n + 1 : nullptr;
}

char* const* environment_find(char* const* envp, const char* name) {
  for (char* const* e = envp; e && *e; ++e)
    if (environment_entry_value(*e, name)) return e;
  return nullptr;
}

const char* environment_value(char* const* envp, const char* name) {
  char* const* slot = environment_find(envp, name);
  return slot ? environment_entry_value(*slot, name) : nullptr;
}

}  // namespace zt
