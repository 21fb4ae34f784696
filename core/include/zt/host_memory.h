// What the Linux kernel reports about host memory: MemAvailable (/proc/meminfo), which fit
// checks compare with before allocating model states, and this process's resident set and its
// peak (VmRSS, VmHWM in /proc/self/status), which run reports show. And the allocator settings a
// process that holds model states in host memory runs with.
// Thread safety: reentrant; every call reads /proc afresh. configure_host_allocator() is for
// the start of main, before other threads allocate.
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

// Sets glibc's malloc for training (the trainer's main calls it first; so should a program of
// your own that builds an Engine). Two fixed thresholds replace glibc's moving ones:
//  - blocks of 4 MiB or more get mappings of their own, returned to the system when freed. Left
//    to itself glibc raises that threshold to the largest block freed (up to 32 MiB), after which
//    shard-sized blocks come from the heap and stay resident when freed: a model built or
//    streamed in pieces (partitioned construction, offload) would keep growing host memory.
//  - up to 64 MiB free at the top of a heap stays with the process. Fixing the first threshold
//    also fixes this one, at glibc's 128 KiB: every free at the top of the heap then hands its
//    pages back, and the next step faults them in again (measured: 12k-68k page faults and ~20%
//    more CPU time per step on the bench GPTs).
// Nothing happens with another C library.
ZT_API void configure_host_allocator();

// The value of GLIBC_TUNABLES for a process that holds model states, given the one it would
// inherit (`current`, null when unset): glibc.malloc.hugetlb=1 added, so glibc asks for
// transparent huge pages (madvise) on the mappings of those 4 MiB-or-larger blocks. Each one is
// fresh memory the kernel faults in and zero-fills; in 4 KiB pages that was most of a
// ZeRO-Infinity step's "compute" (measured: 58% of a 2B-GPT rank's CPU time in the kernel's
// page-fault path; with the tunable a 200M-parameter NVMe-offloaded step took 19% less time, the
// same peak RSS). Only read when a process starts, so the launcher sets it in the ranks'
// environment, and the trainer, started as a rank by another launcher or as a single process,
// starts itself again with it; a program of your own sets it before it starts. A value that
// already names glibc.malloc.hugetlb is kept as given.
ZT_API std::string glibc_tunables_for_training(const char* current);
// Whether a process that started with GLIBC_TUNABLES = `current` (null when unset) already runs
// as glibc_tunables_for_training asks: true when the value names glibc.malloc.hugetlb, whatever
// its setting, so the trainer restarts itself only when this is false.
ZT_API bool glibc_tunables_name_hugetlb(const char* current);

// From an executable's DT_PREINIT_ARRAY, before the static initialisers of any library run
// (zt_startup_heap, which the trainer and the tests' programs link): gives glibc's heap its first
// 64 MiB at once and asks the kernel for transparent huge pages on them (madvise), what glibc
// itself does for a process started with glibc.malloc.hugetlb=1. LibTorch's initialisers fill
// about 40 MiB of heap with small blocks (its operator tables); in 4 KiB pages that was 11k of the
// 17k page faults of every start (measured: `trainer --help` 17k -> 6k faults, 632 -> 462 ms of
// CPU).
// Returns whether it did: not where `tunables` (the GLIBC_TUNABLES a process started with, null
// when unset) names glibc.malloc.hugetlb (glibc does it then), where THP is not in madvise mode,
// where the heap has room at its top already, nor with another C library. Uses nothing of the C++
// library's and reads no C++ static object: safe before any initialiser.
ZT_API bool advise_startup_heap(const char* tunables);
// From the executable's own initialisers, which run after every library's: glibc's default
// padding back (when advise_startup_heap did anything), so the heap grows and shrinks from then
// on as without the advice.
ZT_API void end_startup_heap_advice();

// One line for a run header: which pages glibc gives the blocks of 4 MiB or more, from the
// GLIBC_TUNABLES a process started with (`tunables`, null when unset) and the host's transparent
// huge page mode (`thp_enabled`: the text of /sys/kernel/mm/transparent_hugepage/enabled, ""
// when unknown). "host allocator: glibc, blocks of 4 MiB or more in transparent huge pages
// (glibc.malloc.hugetlb=1; THP madvise)", or why they fault in 4 KiB pages and the fix.
ZT_API std::string host_allocator_line(const char* tunables, const std::string& thp_enabled);
// The same for this process.
ZT_API std::string host_allocator_line();

}  // namespace zt
