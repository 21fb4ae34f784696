// Error messages name types and plugin kinds with the right article ("an integer", "an
// optimizer plugin", "a number").
#include <doctest/doctest.h>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/config.h"
#include "zt/options.h"

using zt::test::contains;

TEST_CASE("type errors put the right article before the type name") {
  zt::OptionSpec spec = zt::opt_int("width", 8, "a width");
  auto message_for = [&](const zt::Value& v) {
    try {
      zt::check_option(spec, v, "model", {"job.toml", 1, 1});
    } catch (const zt::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(contains(message_for(std::string("wide")), "model.width must be an integer, got string"));
  spec = zt::opt_double("lr", 1.0, "learning rate");
  CHECK(contains(message_for(std::string("fast")), "model.lr must be a number, got string"));
  spec = zt::opt_bool("on", false, "switch");
  CHECK(contains(message_for(int64_t{1}), "model.on must be a boolean, got integer"));
  spec = zt::opt_string_list("dirs", {}, "folders");
  CHECK(contains(message_for(std::string("/d")),
                 "model.dirs must be an array of strings, got string"));
  spec = zt::opt_double_list("betas", {0.9}, "betas");
  CHECK(contains(message_for(int64_t{1}), "model.betas must be an array of numbers, got integer"));
}

TEST_CASE("a plugin of the wrong kind is named with the right article") {
  std::string e;
  try {
    zt::Config::load_string("[run]\ntask = \"smoke\"\n[plugins]\noptimizer = \"comm_ucx\"\n",
                            "job.toml");
  } catch (const zt::ConfigError& err) {
    e = err.what();
  }
  CHECK(contains(e, "plugins.optimizer = \"comm_ucx\" names a comm plugin, but plugins.optimizer "
                    "needs an optimizer plugin"));
}
