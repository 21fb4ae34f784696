// What the Linux kernel reports about host memory: MemAvailable (/proc/meminfo), which fit
// checks compare with before allocating model states, and this process's resident set and its
// peak (VmRSS, VmHWM in /proc/self/status), which run reports show.
// Thread safety: reentrant; every call reads /proc afresh.
#pragma once

#include <cstdint>
#include <string>

#include "zt/api.h"

namespace zt {

// The value of the "<field>:  <n> kB" line of a /proc text (/proc/meminfo, /proc/self/status),
// in bytes. `field` is the name without its colon ("MemAvailable"). -1 when no line has that
// field or its number is malformed.
ZT_API int64_t parse_proc_kib(const std::string& text, const std::string& field);

// MemAvailable of this host in bytes; -1 when the kernel does not report it (before Linux 3.14)
// or /proc is not readable.
ZT_API int64_t mem_available_bytes();
// VmRSS and VmHWM of this process in bytes; -1 when unknown.
ZT_API int64_t process_rss_bytes();
ZT_API int64_t process_peak_rss_bytes();

}  // namespace zt
