// Reading an environment block as the kernel passed it (`envp`, the third argument of an
// executable's DT_PREINIT_ARRAY entries): there libc's environ is not set yet (it is as main
// starts), so getenv cannot be used. The start-up hooks (the heap's huge pages, a rank's restart
// with glibc's tunables) read theirs through these.
// Thread safety: pure functions; they use nothing of the C++ library's and read no C++ static
// object, so they are safe before any initialiser.
#pragma once

#include "zt/api.h"

namespace zt {

// The value of environment entry `entry` ("NAME=value") when it is `name`'s, else null.
ZT_API const char* environment_entry_value(const char* entry, const char* name);
// The value of `name` in `envp` (null-terminated; null is an empty block), the first entry's;
// null when none names it.
ZT_API const char* environment_value(char* const* envp, const char* name);
// The slot of the first entry of `envp` that names `name`, null when none does. A block may name a
// variable twice, and some readers take every entry (glibc its GLIBC_TUNABLES): the next one is
// environment_find(slot + 1, name).
ZT_API char* const* environment_find(char* const* envp, const char* name);

}  // namespace zt
