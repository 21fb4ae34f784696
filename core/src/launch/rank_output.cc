#include "launch/rank_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace zt {

namespace {

constexpr size_t kMaxLine = 64 * 1024;

// Writes all of `text` to `fd` (one write when the pipe or terminal takes it whole).
void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n > 0) done += static_cast<size_t>(n);
    else if (n < 0 && errno == EINTR) continue;
    else return;  // our stderr is gone: nothing better to do with the text
  }
}

}  // namespace

RankOutputRelay::RankOutputRelay(int ranks) : out_(ranks) {}

RankOutputRelay::~RankOutputRelay() {
  for (auto& o : out_)
    if (o.fd >= 0) close(o.fd);
}

void RankOutputRelay::attach(int rank, int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  out_[rank].fd = fd;
}

void RankOutputRelay::pump(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (size_t r = 0; r < out_.size(); ++r) {
    if (out_[r].fd >= 0) {
      fds.push_back({out_[r].fd, POLLIN, 0});
      ranks.push_back(static_cast<int>(r));
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // EINTR: the caller comes back
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) drain(ranks[i]);
  }
}

// Reads what `rank` has written so far, without blocking; closes the pipe at end of file.
void RankOutputRelay::drain(int rank) {
  RankOutput& o = out_[rank];
  char buf[4096];
  while (o.fd >= 0) {
    ssize_t n = read(o.fd, buf, sizeof buf);
    if (n > 0) {
      take(rank, buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n == 0 || errno != EAGAIN) {
        close(o.fd);
        o.fd = -1;
      }
      return;
    }
  }
}

void RankOutputRelay::take(int rank, const char* data, size_t size) {
  RankOutput& o = out_[rank];
  o.partial.append(data, size);
  size_t nl;
  while ((nl = o.partial.find('\n')) != std::string::npos || o.partial.size() > kMaxLine) {
    size_t end = nl == std::string::npos ? kMaxLine : nl;
    forward_line(o, o.partial.substr(0, end));
    o.partial.erase(0, nl == std::string::npos ? end : end + 1);
  }
}

void RankOutputRelay::forward_line(RankOutput& o, const std::string& line) {
  write_all(2, line + "\n");
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  o.last_line = line;
  o.last_seq = ++line_seq_;
}

void RankOutputRelay::finish(int rank) {
  RankOutput& o = out_[rank];
  drain(rank);
  if (!o.partial.empty()) forward_line(o, o.partial);
  o.partial.clear();
  if (o.fd >= 0) close(o.fd);
  o.fd = -1;
}

}  // namespace zt
