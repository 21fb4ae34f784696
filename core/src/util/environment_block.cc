#include "zt/host/environment_block.h"

#include <cstring>

namespace zt {

const char* environment_entry_value(const char* entry, const char* name) {
  const size_t n = std::strlen(name);
  return std::strncmp(entry, name, n) == 0 && entry[n] == '=' ? entry + n + 1 : nullptr;
}

const char* environment_value(char* const* envp, const char* name) {
  for (char* const* e = envp; e && *e; ++e)
    if (const char* value = environment_entry_value(*e, name)) return value;
  return nullptr;
}

}  // namespace zt
