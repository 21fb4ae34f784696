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
// The RAM this process may still take: MemAvailable, or the room left under its memory cgroup's
// limit (a container's, a Slurm job's --mem) where that is smaller, since the kernel kills there
// long before the host runs short; -1 when neither is known. `source`, when given, gets which
// of the two it is, to follow the amount in messages: "available (MemAvailable)", or "left under
// the memory cgroup's limit (<its file>: <limit>, <usage> in use)".
ZT_API int64_t host_memory_room_bytes(std::string* source = nullptr);
// VmRSS and VmHWM of this process in bytes; -1 when unknown.
ZT_API int64_t process_rss_bytes();
ZT_API int64_t process_peak_rss_bytes();
// Starts VmHWM again from the resident size now (writes 5 to /proc/self/clear_refs), so a peak
// read later is of what follows: a live A/B arm's, not an earlier arm's. False where the kernel
// refuses (the peak then keeps counting from the process's start).
ZT_API bool reset_process_peak_rss();

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
// inherit (`current`, as glibc_tunables below reads it; "" when unset): glibc.malloc.hugetlb=1
// added, so glibc asks for transparent huge pages (madvise) on the mappings of those
// 4 MiB-or-larger blocks. Each one is fresh memory the kernel faults in and zero-fills; in 4 KiB
// pages that was most of a ZeRO-Infinity step's "compute" (measured: 58% of a 2B-GPT rank's CPU
// time in the kernel's page-fault path; with the tunable a 200M-parameter NVMe-offloaded step
// took 19% less time, the same peak RSS). Only read when a process starts, so the launcher sets
// it in the ranks' environment, and the trainer, started as a rank by another launcher or as a
// single process, starts itself again with it; a program of your own sets it before it starts. A
// value that already names glibc.malloc.hugetlb is kept as given.
ZT_API std::string glibc_tunables_for_training(const std::string& current);
// Whether a process that started with GLIBC_TUNABLES = `current` (null when unset) already runs
// as glibc_tunables_for_training asks: true when the value names glibc.malloc.hugetlb, whatever
// its setting, so the trainer restarts itself only when this is false.
ZT_API bool glibc_tunables_name_hugetlb(const char* current);

// GLIBC_TUNABLES as glibc reads it from the environment block `envp` (null-terminated; a
// process's own is `environ`, or /proc/self/environ as it started): glibc parses every entry of
// that name in order, a later setting overriding an earlier one, so this joins their values with
// ':'. "" when no entry names it. getenv sees only the first.
ZT_API std::string glibc_tunables(char* const* envp);
// The setting of tunable `name` (e.g. "glibc.malloc.hugetlb") in a GLIBC_TUNABLES value: the
// last mention's, as glibc keeps it; "" when the value does not name it.
ZT_API std::string glibc_tunable_value(const std::string& tunables, const std::string& name);

// Whether this host's transparent huge pages are in madvise mode (the bracketed word of
// /sys/kernel/mm/transparent_hugepage/enabled): only then do glibc's and zt's advice matter.
// false where the file is absent. With plain system calls: safe before any initialiser.
ZT_API bool thp_in_madvise_mode();

// From an executable's DT_PREINIT_ARRAY, before the static initialisers of any library run
// (zt_startup_heap, which the trainer and the tests' programs link): gives glibc's heap its first
// 64 MiB at once and asks the kernel for transparent huge pages on them (madvise), what glibc
// itself does for a process started with glibc.malloc.hugetlb=1. LibTorch's initialisers fill
// about 40 MiB of heap with small blocks (its operator tables); in 4 KiB pages that was 11k of the
// 17k page faults of every start (measured: `trainer --help` 17k -> 6k faults, 632 -> 462 ms of
// CPU).
// Returns whether it did: not where any GLIBC_TUNABLES entry of `envp` (the environment the
// process started with) names glibc.malloc.hugetlb (glibc does it then, or was told not to), where
// THP is not in madvise mode, where the heap has room at its top already, nor with another C
// library. Uses nothing of the C++ library's and reads no C++ static object: safe before any
// initialiser.
ZT_API bool advise_startup_heap(char* const* envp);
// From the executable's own initialisers, which run after every library's: glibc's default
// padding at the heap's top back (when advise_startup_heap did anything), so the heap grows and
// shrinks by glibc's usual steps from then on. One setting stays changed: any mallopt fixes
// glibc's moving threshold for a block's own mapping at its current value (128 KiB at start-up),
// which configure_host_allocator fixes anyway (at 4 MiB) in a process that holds model states.
ZT_API void end_startup_heap_advice();

// One line for a run header: which pages glibc gives the blocks of 4 MiB or more, from the
// GLIBC_TUNABLES a process started with (`tunables`, as glibc_tunables gives it; null when unset)
// and the host's transparent huge page mode (`thp_enabled`: the text of
// /sys/kernel/mm/transparent_hugepage/enabled, "" when unknown). "host allocator: glibc, blocks of
// 4 MiB or more in transparent huge pages (glibc.malloc.hugetlb=1; THP madvise)", or why they fault
// in 4 KiB pages and the fix.
ZT_API std::string host_allocator_line(const char* tunables, const std::string& thp_enabled);
// The same for this process (every GLIBC_TUNABLES entry of its environment).
ZT_API std::string host_allocator_line();

}  // namespace zt
