// Typed options: checking values against specs, defaults, and the TOML spelling of values.
#include <doctest/doctest.h>

#include <limits>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/options.h"

using zt::test::contains;

TEST_CASE("check_option widens integers to numbers and rejects other type mismatches") {
  auto spec = zt::opt_double("lr", 1e-3, "learning rate", 0.0);
  zt::SourceLocation where{"x.toml", 3, 5};
  CHECK(std::get<double>(zt::check_option(spec, int64_t{2}, "plugin.adam", where)) == 2.0);
  try {
    zt::check_option(spec, std::string("fast"), "plugin.adam", where);
    FAIL("expected ConfigError");
  } catch (const zt::ConfigError& e) {
    CHECK(contains(e.what(), "x.toml:3:5"));
    CHECK(contains(e.what(), "plugin.adam.lr must be a number, got string \"fast\""));
  }
  auto count = zt::opt_int("steps", 1, "steps", 1);
  CHECK_THROWS_AS(zt::check_option(count, 1.5, "run", where), zt::ConfigError);
}

TEST_CASE("check_option enforces ranges and choices, naming the allowed values") {
  zt::SourceLocation where{"--set zero.stage=7", 0, 0};
  auto stage = zt::opt_int("stage", 0, "ZeRO stage", 0, 3);
  CHECK(std::get<int64_t>(zt::check_option(stage, int64_t{3}, "zero", where)) == 3);
  try {
    zt::check_option(stage, int64_t{7}, "zero", where);
    FAIL("expected ConfigError");
  } catch (const zt::ConfigError& e) {
    CHECK(contains(e.what(), "--set zero.stage=7: zero.stage = 7 is out of range"));
    CHECK(contains(e.what(), "from 0 to 3"));
  }
  auto device = zt::opt_string("device", "cpu", "device", {"cpu", "cuda"});
  try {
    zt::check_option(device, std::string("tpu"), "launch", where);
    FAIL("expected ConfigError");
  } catch (const zt::ConfigError& e) {
    CHECK(contains(e.what(), "is not one of \"cpu\", \"cuda\""));
  }
}

TEST_CASE("Options fill defaults, remember where values came from, and refuse undeclared reads") {
  std::vector<zt::OptionSpec> specs = {zt::opt_int("bucket_mb", 25, "bucket"),
                                       zt::opt_bool("overlap", true, "overlap")};
  zt::Options o("plugin.shard_bucket", specs, {{"bucket_mb", int64_t{8}}},
                {{"bucket_mb", zt::SourceLocation{"a.toml", 9, 1}}});
  CHECK(o.get_int("bucket_mb") == 8);
  CHECK(o.get_bool("overlap") == true);
  CHECK(o.is_set("bucket_mb"));
  CHECK_FALSE(o.is_set("overlap"));
  CHECK(o.where("bucket_mb").str() == "a.toml:9:1");
  CHECK(o.where("overlap").str() == "default");
  CHECK_THROWS_AS(o.get_int("bucket_sz"), zt::InternalError);
  CHECK_THROWS_AS(o.get_string("bucket_mb"), zt::InternalError);
}

TEST_CASE("values print as TOML that reads back with the same type") {
  CHECK(zt::value_to_toml(int64_t{3}) == "3");
  CHECK(zt::value_to_toml(2.0) == "2.0");
  CHECK(zt::value_to_toml(true) == "true");
  CHECK(zt::value_to_toml(std::string("a\"b")) == "\"a\\\"b\"");
  CHECK(zt::value_to_toml(std::vector<double>{0.9, 0.95}) ==
        "[0.90000000000000002, 0.94999999999999996]");
  CHECK(zt::value_to_toml(std::vector<std::string>{"x", "y"}) == "[\"x\", \"y\"]");
}

TEST_CASE("check_option refuses a list holding inf or nan, naming the list") {
  zt::SourceLocation where{"job.toml", 7, 1};
  auto steps = zt::opt_double_list("steps", {}, "steps to trace");
  CHECK(std::get<std::vector<double>>(zt::check_option(steps, std::vector<double>{1, 2}, "trace",
                                                       where)) == std::vector<double>{1, 2});
  for (const double bad :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    try {
      zt::check_option(steps, std::vector<double>{1, bad}, "trace", where);
      FAIL("expected ConfigError");
    } catch (const zt::ConfigError& e) {
      CHECK(contains(e.what(), "job.toml:7:1: trace.steps = [1"));
      CHECK(contains(e.what(), "give finite numbers"));
    }
  }
}
