// The launcher's relay of its ranks' stderr: each rank writes into a pipe, and the relay
// forwards whole lines to the launcher's own stderr as they come (a line longer than 64 KiB in
// pieces, rather than held without bound). It keeps each rank's last non-empty line and the
// order it arrived in among all ranks' lines, so the launcher can name the rank whose error
// printed first.
//
// The writes to the launcher's stderr run on a thread of the relay's own: a reader that stops
// taking them (a terminal paused with Ctrl-S, a stuck `tee`) would otherwise stop the thread
// that supervises the ranks, and with it their timeouts, failures and signals. While more than
// kBacklogBytes wait to be written, the relay reads no more from the ranks' pipes: a rank then
// waits in its write, as on a paused terminal of its own, and no text is lost.
// Thread safety: none; the launcher's thread owns it (the writing thread is internal).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace zt {

class RankOutputRelay {
 public:
  static constexpr size_t kBacklogBytes = size_t{1} << 20;

  explicit RankOutputRelay(int ranks);
  // Closes the pipes still open and waits until what was relayed is written: nothing is lost,
  // and the launcher's own last lines come after its ranks'.
  ~RankOutputRelay();
  RankOutputRelay(const RankOutputRelay&) = delete;
  RankOutputRelay& operator=(const RankOutputRelay&) = delete;

  // Takes the read end of `rank`'s pipe; made non-blocking here (only this end: a rank whose
  // pipe is full waits rather than losing text).
  void attach(int rank, int fd);
  // Waits up to `timeout_ms` for output of any rank and forwards what came; sleeps that long
  // when no pipe is open or the backlog is full.
  void pump(int timeout_ms);
  // `rank` ended: forwards everything it wrote, an unfinished last line included, and closes its
  // pipe, even if a process the rank started still holds it, so no wait is unbounded.
  void finish(int rank);
  // A line of the launcher's own (with its newline), written in order with the ranks'.
  void say(const std::string& line);

  // `rank`'s last non-empty whole line, without the newline; "" when none.
  const std::string& last_line(int rank) const { return out_[rank].last_line; }
  // The arrival order of last_line() among all ranks' lines; 0 when none.
  uint64_t last_seq(int rank) const { return out_[rank].last_seq; }

 private:
  struct RankOutput {
    int fd = -1;          // -1 once closed
    std::string partial;  // bytes after the last newline
    std::string last_line;
    uint64_t last_seq = 0;
  };

  struct Writer;  // the text waiting for stderr, shared with the writing thread

  void drain(int rank, bool whole);
  void take(int rank, const char* data, size_t size);
  void forward_line(RankOutput& o, const std::string& line);

  std::vector<RankOutput> out_;
  uint64_t line_seq_ = 0;
  std::unique_ptr<Writer> writer_;
  std::thread writing_;
};

}  // namespace zt
