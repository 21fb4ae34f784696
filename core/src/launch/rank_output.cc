#include "launch/rank_output.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "zt/host/standard_streams.h"

namespace zt {

namespace {

constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

struct RankOutputRelay::Writer {
  std::mutex mutex;
  std::condition_variable changed;  // text queued, or closing
  std::string queued;
  size_t writing = 0;  // bytes the thread took and has not written yet
  bool closing = false;

  size_t backlog() {
    const std::lock_guard<std::mutex> lock(mutex);
    return queued.size() + writing;
  }
  void push(const std::string& text) {
    const std::lock_guard<std::mutex> lock(mutex);
    queued += text;
    changed.notify_one();
  }
  // The writing thread: everything queued, in order, until closing finds nothing left.
  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [this] { return !queued.empty() || closing; });
      if (queued.empty()) return;
      std::string text;
      text.swap(queued);
      writing = text.size();
      lock.unlock();
      write_all_to(STDERR_FILENO, text);
      lock.lock();
      writing = 0;
    }
  }
};

RankOutputRelay::RankOutputRelay(int ranks) : out_(ranks), writer_(std::make_unique<Writer>()) {
  // The writing thread takes no signal (it starts with every one blocked): the launcher's
  // handlers run on its supervising thread, and a write to a closed pipe returns EPIPE there
  // instead of raising SIGPIPE, which the launcher ignores only while it supervises.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  try {
    writing_ = std::thread([w = writer_.get()] { w->run(); });
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

RankOutputRelay::~RankOutputRelay() {
  for (auto& o : out_)
    if (o.fd >= 0) close(o.fd);
  {
    const std::lock_guard<std::mutex> lock(writer_->mutex);
    writer_->closing = true;
    writer_->changed.notify_one();
  }
  writing_.join();
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
  if (fds.empty() || writer_->backlog() >= kBacklogBytes) {
    // Nothing to read, or no room for it: the ranks' writes wait (their pipes fill).
    ::poll(nullptr, 0, timeout_ms);
    return;
  }
  if (poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // EINTR: the caller comes back
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents != 0) drain(ranks[i], false);
  }
}

// Reads what `rank` has written so far, without blocking, or (`whole` false) until the backlog
// is full; closes the pipe at end of file.
void RankOutputRelay::drain(int rank, bool whole) {
  RankOutput& o = out_[rank];
  char buf[4096];
  while (o.fd >= 0) {
    if (!whole && writer_->backlog() >= kBacklogBytes) return;
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
  writer_->push(line + "\n");
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  o.last_line = line;
  o.last_seq = ++line_seq_;
}

void RankOutputRelay::say(const std::string& line) { writer_->push(line); }

void RankOutputRelay::finish(int rank) {
  RankOutput& o = out_[rank];
  drain(rank, true);  // what an ended rank left in its pipe: 64 KiB at most
  if (!o.partial.empty()) forward_line(o, o.partial);
  o.partial.clear();
  if (o.fd >= 0) close(o.fd);
  o.fd = -1;
}

}  // namespace zt
