// Reading only the plugin search path of a config: what `trainer plugins ...` needs.
#include <doctest/doctest.h>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/config.h"

using zt::test::contains;

namespace {

std::string dirs_error(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    zt::Config::plugin_dirs_of_string(toml, "job.toml", overrides);
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the plugin search path is read from a file that sets nothing else") {
  const std::string only_dirs = "[plugins]\ndirs = [\"/opt/a\", \"rel/b\"]\n";
  CHECK(zt::Config::plugin_dirs_of_string(only_dirs, "job.toml") ==
        std::vector<std::string>{"/opt/a", "rel/b"});
  // The whole config is not valid for a training run (no optimizer), which is not this reader's
  // business.
  CHECK_THROWS_AS(zt::Config::load_string(only_dirs, "job.toml"), zt::ConfigError);
  CHECK(zt::Config::plugin_dirs_of_string("", "job.toml").empty());
}

TEST_CASE("the plugin search path ignores the rest of the file, even where it is wrong") {
  const std::string other_problems = "[zero]\nstage = 9\nbucket = 1\n[nonsense]\nx = "
                                     "1\n[plugins]\ncomm = \"comm_nope\"\ndirs = [\"/d\"]\n";
  CHECK(zt::Config::plugin_dirs_of_string(other_problems, "job.toml") ==
        std::vector<std::string>{"/d"});
}

TEST_CASE("--set plugins.dirs replaces the file's dirs, and other overrides are not read") {
  auto dirs = zt::Config::plugin_dirs_of_string(
      "[plugins]\ndirs = [\"/a\"]\n", "job.toml",
      {"zero.stage=banana", "plugins.dirs=[\"/x\", \"/y\"]"});
  CHECK(dirs == std::vector<std::string>{"/x", "/y"});
}

TEST_CASE("a plugins.dirs that is not an array of strings is an error naming the place") {
  std::string e = dirs_error("[plugins]\ndirs = \"/d\"\n");
  CHECK(contains(e, "job.toml:2:8: plugins.dirs must be an array of strings, got string \"/d\""));
  e = dirs_error("", {"plugins.dirs=3"});
  CHECK(contains(e, "plugins.dirs must be an array of strings, got integer 3"));
  e = dirs_error("[plugins\n");
  CHECK(contains(e, "malformed TOML"));
}
