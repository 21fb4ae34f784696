// The launcher's relay of its ranks' stderr: each rank writes into a pipe, and the relay
// forwards whole lines to the launcher's own stderr as they come (a line longer than 64 KiB in
// pieces, rather than held without bound). It keeps each rank's last non-empty line and the
// order it arrived in among all ranks' lines, so the launcher can name the rank whose error
// printed first.
// Thread safety: none; the launcher's thread owns it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt {

class RankOutputRelay {
 public:
  explicit RankOutputRelay(int ranks);
  ~RankOutputRelay();  // closes the pipes still open
  RankOutputRelay(const RankOutputRelay&) = delete;
  RankOutputRelay& operator=(const RankOutputRelay&) = delete;

  // Takes the read end of `rank`'s pipe; made non-blocking here (only this end: a rank whose
  // pipe is full waits rather than losing text).
  void attach(int rank, int fd);
  // Waits up to `timeout_ms` for output of any rank and forwards what came; sleeps that long
  // when no pipe is open.
  void pump(int timeout_ms);
  // `rank` ended: forwards everything it wrote, an unfinished last line included, and closes its
  // pipe, even if a process the rank started still holds it, so no wait is unbounded.
  void finish(int rank);

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

  void drain(int rank);
  void take(int rank, const char* data, size_t size);
  void forward_line(RankOutput& o, const std::string& line);

  std::vector<RankOutput> out_;
  uint64_t line_seq_ = 0;
};

}  // namespace zt
