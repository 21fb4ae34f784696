#include "observe/observed_work.h"

#include <optional>

#include "zt/error.h"

namespace zt {

template <typename F>
void ObservedWork::blocked(const F& wait_inner) {
  if (is_completed()) {
    // Already ended, perhaps failed (a size mismatch, a peer found dead while the caller was
    // still computing): a failure still dumps saying where the thread waited. The label is
    // built only then, so a wait on a finished op costs nothing more.
    try {
      wait_inner();
    } catch (const std::exception& e) {
      trace::set_waiting(waiting_label());
      waited(true, &e);
      trace::clear_waiting();
      throw;
    }
    waited(false, nullptr);
    return;
  }
  std::optional<trace::Scope> scope;
  const Span s = span();
  if (s.name) scope.emplace(s.name, s.index, s.what, s.category);
  trace::set_waiting(waiting_label());
  try {
    if (stalled()) stall();
    wait_inner();
  } catch (const std::exception& e) {
    waited(true, &e);
    trace::clear_waiting();
    throw;
  } catch (...) {
    waited(true, nullptr);
    trace::clear_waiting();
    throw;
  }
  trace::clear_waiting();
  waited(false, nullptr);
}

void ObservedWork::wait(std::chrono::milliseconds timeout) {
  blocked([&] { inner_->wait(timeout); });
}

void ObservedWork::wait() {
  blocked([&] { inner_->wait(); });
}

void ObservedWork::stall() { throw InternalError("ObservedWork::stall without a stall"); }

}  // namespace zt
