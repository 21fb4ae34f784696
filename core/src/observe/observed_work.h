// ObservedWork: a Work that forwards to the plugin's and, when a wait blocks, says what the
// waiting thread waits on (trace.h's waiting label, for a flight dump) and may time the wait as
// a span. The observed communicator's and tier's handles (flight_recorder.h) are two of these.
// Thread safety: as Work; the hooks run on the waiting thread.
#pragma once

#include <memory>
#include <string>

#include "zt/host/trace.h"
#include "zt/work.h"

namespace zt {

class ObservedWork : public Work {
 public:
  explicit ObservedWork(std::shared_ptr<Work> inner) : inner_(std::move(inner)) {}

  bool is_completed() override { return !stalled() && inner_->is_completed(); }
  void wait(std::chrono::milliseconds timeout) override;
  void wait() override;
  std::exception_ptr exception() override { return inner_->exception(); }

 protected:
  // The span a blocking wait is timed as, if any (static strings, as trace::Scope keeps them).
  struct Span {
    const char* name = nullptr;
    int64_t index = -1;
    const char* what = "";
    const char* category = trace::kCompute;
  };
  virtual Span span() const { return {}; }
  // What the thread waits on while blocked ("all_gather #12 (6.0 MiB) on world").
  virtual std::string waiting_label() const = 0;
  // After the wait returned (failed: it threw `error`), on the waiting thread.
  virtual void waited(bool failed, const std::exception* error) = 0;
  // True while an injected stall (ZT_TEST_FAULT) holds the op; the wait then blocks in stall().
  virtual bool stalled() const { return false; }
  [[noreturn]] virtual void stall();

 private:
  template <typename F>
  void blocked(const F& wait_inner);

  std::shared_ptr<Work> inner_;
};

}  // namespace zt
