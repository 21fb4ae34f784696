// MemoryLedger (core/src/memory_ledger.h): the peak follows gathers, restarts on demand, and
// freeing more than is held is reported as the engine's accounting bug.
#include <doctest/doctest.h>

#include "memory_ledger.h"
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

TEST_CASE("staging bytes come and go") {
  zt::MemoryLedger ledger;
  ledger.staging_added(4096);
  ledger.staging_added(8192);
  ledger.staging_freed(4096);
  CHECK(ledger.report().offload_staging == 8192);
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
