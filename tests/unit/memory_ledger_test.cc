// MemoryLedger (core/src/zero/memory_ledger.h): the peaks follow gathers and staging, the gathered
// one restarts on demand, and freeing more than is held is reported as the engine's accounting
// bug. Its clock (core/src/zero/engine_clock.h) counts waits inside forward_backward() / step()
// only.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "zero/memory_ledger.h"
#include "zt/error.h"

TEST_CASE("the gathered peak follows gathers and survives releases") {
  zt::MemoryLedger ledger;
  ledger.gathered(100);
  ledger.gathered(50);
  ledger.released(100);
  ledger.gathered(20);
  CHECK(ledger.report().params_gathered == 70);
  CHECK(ledger.report().params_gathered_peak == 150);
  ledger.restart_peak();
  CHECK(ledger.report().params_gathered_peak == 70);
}

TEST_CASE("staging bytes come and go, and their peak stays") {
  zt::MemoryLedger ledger;
  ledger.staging_added(4096);
  ledger.staging_added(8192);
  ledger.staging_freed(4096);
  CHECK(ledger.report().offload_staging == 8192);
  CHECK(ledger.report().offload_staging_peak == 12288);
  ledger.staging_freed(8192);
  ledger.staging_added(1000);
  CHECK(ledger.report().offload_staging == 1000);
  CHECK(ledger.report().offload_staging_peak == 12288);
  // The gathered peak restarting leaves the staging peak alone.
  ledger.restart_peak();
  CHECK(ledger.report().offload_staging_peak == 12288);
}

TEST_CASE("freeing more than is held is an InternalError naming the category") {
  zt::MemoryLedger ledger;
  ledger.gathered(10);
  CHECK_THROWS_WITH_AS(ledger.released(11), doctest::Contains("gathered parameters"),
                       zt::InternalError);
  CHECK(ledger.report().params_gathered == 10);
  CHECK_THROWS_WITH_AS(ledger.staging_freed(1), doctest::Contains("offload staging"),
                       zt::InternalError);
}

namespace {

// A collective or transfer that another thread completes after `delay`.
std::shared_ptr<zt::FutureWork> finished_after(std::chrono::milliseconds delay,
                                               std::thread& finisher) {
  auto work = std::make_shared<zt::FutureWork>("test op", std::chrono::seconds(10));
  finisher = std::thread([work, delay] {
    std::this_thread::sleep_for(delay);
    work->complete();
  });
  return work;
}

}  // namespace

TEST_CASE("the clock adds waits to their field inside a phase, and nothing outside one") {
  zt::MemoryLedger ledger;
  zt::EngineClock& clock = ledger.clock();
  std::thread finisher;
  // Outside forward_backward() / step(): an accessor's or a checkpoint's wait belongs to no step.
  auto outside = finished_after(std::chrono::milliseconds(20), finisher);
  clock.wait(*outside, &zt::EngineTimes::comm_wait);
  finisher.join();
  CHECK(clock.times().comm_wait == 0);
  {
    const zt::EngineClock::Phase phase(clock, &zt::EngineTimes::step);
    auto inside = finished_after(std::chrono::milliseconds(30), finisher);
    clock.wait(*inside, &zt::EngineTimes::read_wait);
    finisher.join();
    const zt::EngineClock::Timer timer(clock, &zt::EngineTimes::optimizer);
  }
  const zt::EngineTimes t = clock.times();
  CHECK(t.read_wait >= 0.03);
  CHECK(t.step >= t.read_wait);
  CHECK(t.comm_wait == 0);
  CHECK(t.write_wait == 0);
  CHECK(t.forward_backward == 0);
  // A failed wait still counts its time, and the phase ends with the exception.
  CHECK_THROWS_AS(
      [&] {
    const zt::EngineClock::Phase phase(clock, &zt::EngineTimes::forward_backward);
    auto failing = std::make_shared<zt::FutureWork>("failing op", std::chrono::seconds(10));
    failing->complete(std::make_exception_ptr(zt::IoError("disk gone")));
    clock.wait(*failing, &zt::EngineTimes::write_wait);
      }(),
      zt::IoError);
  CHECK(clock.times().forward_backward > 0);
  // The exception closed the phase: a wait after it counts nowhere again.
  const double write_wait = clock.times().write_wait;
  auto after = finished_after(std::chrono::milliseconds(10), finisher);
  clock.wait(*after, &zt::EngineTimes::write_wait);
  finisher.join();
  CHECK(clock.times().write_wait == write_wait);
}
