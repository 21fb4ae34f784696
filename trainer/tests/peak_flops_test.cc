// The MFU peak: a step faster than a peak probed under load raises it, and the run's end keeps the
// higher rate in the cache for later runs.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../../tests/test_util.h"
#include "run/peak_flops.h"

using zt::trainer::keep_raised_peak;
using zt::trainer::PeakFlops;
using zt::trainer::raise_peak;

TEST_CASE("a step above the cached peak raises it, in the run and in the cache") {
  zt::test::TempDir dir;
  const std::string file = dir.file("peak-flops.json");
  zt::test::write_file(file, R"({"cpu | 1 threads": 10.0, "other": 7.0})");
  PeakFlops peak{10.0, "sgemm fp32 1024^3, cached in " + file, file, "cpu | 1 threads", true};
  // At or below the peak: nothing changes.
  CHECK_FALSE(raise_peak(peak, 9.5));
  CHECK_FALSE(raise_peak(peak, 10.0));
  CHECK(peak.per_rank == 10.0);
  CHECK(peak.how.find("raised") == std::string::npos);
  // Above: the peak is the rate reached (MFU 100% at that step), and so is the cache's entry;
  // the other entries stay.
  CHECK(raise_peak(peak, 12.5));
  CHECK(peak.per_rank == 12.5);
  CHECK(peak.how.find("raised to a step's rate") != std::string::npos);
  // The step only raises it in memory; the run's end writes it.
  CHECK(nlohmann::json::parse(zt::test::read_file(file))["cpu | 1 threads"].get<double>() == 10.0);
  keep_raised_peak(peak);
  nlohmann::json j = nlohmann::json::parse(zt::test::read_file(file));
  CHECK(j["cpu | 1 threads"].get<double>() == 12.5);
  CHECK(j["other"].get<double>() == 7.0);
  // Raised again, the note is not repeated.
  CHECK(raise_peak(peak, 13.0));
  CHECK(peak.how.find("raised") == peak.how.rfind("raised"));
  keep_raised_peak(peak);
  // A rank that does not write its host's entry raises its own peak only.
  PeakFlops other_rank{10.0, "cached", file, "cpu | 1 threads", false};
  CHECK(raise_peak(other_rank, 20.0));
  CHECK(other_rank.per_rank == 20.0);
  keep_raised_peak(other_rank);
  j = nlohmann::json::parse(zt::test::read_file(file));
  CHECK(j["cpu | 1 threads"].get<double>() == 13.0);
  // No peak known (a probe that failed): no MFU to keep below 100%.
  PeakFlops unknown{};
  CHECK_FALSE(raise_peak(unknown, 5.0));
  CHECK(unknown.per_rank == 0);
}
