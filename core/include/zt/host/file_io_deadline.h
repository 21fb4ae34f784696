// A bound on file I/O the kernel gives no timeout for.
//
// Why: open, stat and read on a file system that stopped answering (an NFS or Lustre server gone,
// a FUSE daemon stuck) block their thread for as long as it stays silent, and nothing cancels a
// blocked system call. The other ranks' collective timeouts would end the job, but they name the
// collective, not the file. A FileIoDeadline around such a call names what it does; a watchdog
// thread (one per process, started with the first scope; a forked child starts its own, without
// the parent's last words and line start) ends the process when a scope is still open after its
// limit: it gives the last words registered below up to 10 s (or half the limit) on a thread of
// their own (they may meet the same stuck storage), writes their lines and then "zt: io error:
// <what> has not returned after N s ...; <way out>" on stderr (last: a launcher names a failed rank
// by its last line; "zt: " is replaced as set below), and _exits with IoError's exit code (5): no
// flush, no teardown, which might block on the same storage. With scopes nested on one thread, the
// innermost names what blocks. Thread safety: scopes on any threads at once; last words added from
// any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "zt/api.h"

namespace zt {

class ZT_API FileIoDeadline {
 public:
  // `what`: e.g. "reading 16777216 bytes at offset 4096 of /ckpt/step-8/rank1.safetensors";
  // `way_out`: what the user can do, e.g. which setting the limit comes from. A `limit` of 0 (or
  // less) watches nothing.
  FileIoDeadline(std::string what, std::chrono::milliseconds limit, std::string way_out);
  ~FileIoDeadline();
  FileIoDeadline(const FileIoDeadline&) = delete;
  FileIoDeadline& operator=(const FileIoDeadline&) = delete;

 private:
  uint64_t id_;  // its scope's; all ones when `limit` watches nothing
};

// The same watchdog for a blocking call that is not file I/O and that nothing else bounds: a
// rendezvous store's reply from a host that vanished without closing the connection (powered
// off, cut from the network) blocks a recv that no timeout covers. Its line reads "comm error:
// <what> has not returned after N s: <cause> and this process ends rather than hang; <way out>",
// and the process exits with CommError's code (4).
class ZT_API CallDeadline {
 public:
  CallDeadline(std::string what, std::chrono::milliseconds limit, std::string cause,
               std::string way_out);
  ~CallDeadline();
  CallDeadline(const CallDeadline&) = delete;
  CallDeadline& operator=(const CallDeadline&) = delete;

 private:
  uint64_t id_;
};

// `words` runs (once, on a thread of its own) before a FileIoDeadline ends this process: e.g.
// removing what only a destructor would have removed. It returns a line to print ("" for none),
// which is printed after the line start.
ZT_API void add_file_io_last_words(std::function<std::string()> words);
// For a process that must go on (a launcher that has its ranks' failure to report, a rank on its
// way to its own error): runs `fn` on a thread of its own and waits at most `limit` for it; true
// when it returned in time. One that did not is left behind (a call blocked on storage cannot be
// cancelled), so `fn` must own what it uses. Exceptions from `fn` are dropped.
ZT_API bool finished_within(std::chrono::milliseconds limit, std::function<void()> fn);
// What the line starts with instead of "zt: ", asked when it is written: a program's own error
// lines' start (the trainer's names the rank, "zt: [rank 1] ").
ZT_API void set_file_io_line_start(std::function<std::string()> start);

}  // namespace zt
