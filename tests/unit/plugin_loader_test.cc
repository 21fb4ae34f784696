// The plugin loader's checks, against fixture plugins that are broken in each possible way.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "../test_util.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"

using zt::test::contains;

namespace {

std::string fixture(const std::string& id) {
  return std::string(ZT_TEST_FIXTURE_DIR) + "/libzt_" + id + ".so";
}

std::string load_error(const std::string& path) {
  try {
    zt::load_plugin_file(path);
  } catch (const zt::PluginError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the built-in comm_ucx plugin loads and describes its options") {
  zt::PluginCatalog catalog;
  const zt::PluginRecord& rec = catalog.load("comm_ucx");
  CHECK(rec.kind == ZT_KIND_COMM);
  CHECK(rec.fingerprint == zt::core_build_fingerprint());
  auto specs = rec.factory->options();
  REQUIRE_FALSE(specs.empty());
  CHECK(specs[0].name == "chunk_kb");
  CHECK(&catalog.load("comm_ucx") == &rec);  // loaded once
}

TEST_CASE("a file that is not a shared object") {
  std::string e = load_error(fixture("not_elf"));
  CHECK(contains(e, "libzt_not_elf.so is not a shared object"));
}

TEST_CASE("a shared object without the info entry") {
  std::string e = load_error(fixture("no_info"));
  CHECK(contains(e, "does not export 'zt_plugin_info_v1'"));
  CHECK(contains(e, "rebuild the plugin"));
}

TEST_CASE("a plugin built for another ABI version") {
  std::string e = load_error(fixture("wrong_abi"));
  // The fixture declares ZT_PLUGIN_ABI_VERSION + 41.
  const unsigned ours = ZT_PLUGIN_ABI_VERSION;
  CHECK(contains(e, "was built for zt plugin ABI " + std::to_string(ours + 41) +
                        ", this zt has ABI " + std::to_string(ours)));
}

TEST_CASE("a plugin with another build fingerprint prints both sides") {
  std::string e = load_error(fixture("wrong_fingerprint"));
  CHECK(contains(e, "compiler=clang-99;cxx11abi=0;torch=9.9.9;cuda=1"));
  CHECK(contains(e, zt::core_build_fingerprint()));
  CHECK(contains(e, "torch 9.9.9 vs"));
}

TEST_CASE("a plugin whose factory class is not its kind's, or whose kind is unknown, is refused") {
  // Cast to zt::ShardStrategyPlugin, its factory crashed the job at create().
  std::string e = load_error(fixture("mismatched_kind"));
  CHECK(contains(e, "declares kind shard, but its factory class does not derive from "
                    "zt::ShardStrategyPlugin"));
  e = load_error(fixture("unknown_kind"));
  CHECK(contains(e, "declares unknown kind 99 (known: 1 comm, 2 shard, 3 offload, 4 optimizer, "
                    "5 model, 6 codec)"));
}

TEST_CASE("a plugin whose option specs the config cannot honour is refused, naming the option") {
  // Taken, create() saw a default check_option refuses, and a checkpoint's config, printed with
  // every default (or a name twice), could not be read back.
  const char* was = std::getenv("ZT_FIXTURE_OPTIONS");
  const std::optional<std::string> before = was ? std::optional<std::string>(was) : std::nullopt;
  std::string e = load_error(fixture("bad_option_specs"));
  CHECK(contains(e, "declares option 'align' whose default its own spec refuses"));
  CHECK(contains(e, "plugin.bad_option_specs.align = 0 is out of range"));
  CHECK(contains(e, "fix the plugin's options()"));
  setenv("ZT_FIXTURE_OPTIONS", "twice", 1);
  CHECK(contains(load_error(fixture("bad_option_specs")), "declares option 'block' twice"));
  setenv("ZT_FIXTURE_OPTIONS", "name", 1);
  CHECK(contains(load_error(fixture("bad_option_specs")),
                 "declares option 'block.size' with a name a TOML bare key cannot write"));
  if (before) setenv("ZT_FIXTURE_OPTIONS", before->c_str(), 1);
  else unsetenv("ZT_FIXTURE_OPTIONS");
}

TEST_CASE("a factory that throws") {
  std::string e = load_error(fixture("throwing_factory"));
  CHECK(contains(e, "its factory threw: fixture factory refuses to start"));
}

TEST_CASE("a plugin that needs a symbol nobody defines fails at load, naming file and symbol") {
  // Opened lazily, this plugin would load and then kill the process at its first call.
  std::string e = load_error(fixture("undefined_symbol"));
  CHECK(contains(e, "cannot load plugin " + fixture("undefined_symbol")));
  CHECK(contains(e, "undefined symbol: zt_fixture_symbol_nobody_defines"));
  CHECK(contains(e, "link the library that defines it"));
  // One of zt's own (a later SDK's): no LINK helps, and the message says what does.
  e = load_error(fixture("newer_sdk_symbol"));
  CHECK(contains(e, "undefined symbol: _ZN2zt"));
  CHECK(contains(e, "built against another zt SDK than this zt (plugin ABI " +
                        std::to_string(ZT_PLUGIN_ABI_VERSION) + ")"));
  CHECK_FALSE(contains(e, "LINK"));
}

TEST_CASE("a missing file and an unknown id list what was found and where") {
  CHECK(contains(load_error("/nonexistent/libzt_x.so"), "does not exist"));
  // A link whose target went is named as one, with what it hides.
  zt::test::TempDir dir;
  std::filesystem::create_symlink(dir.file("gone.so"), dir.file("libzt_x.so"));
  const std::string broken = load_error(dir.file("libzt_x.so"));
  CHECK(contains(broken, "is a broken symbolic link (to " + dir.file("gone.so") + ")"));
  CHECK(contains(broken, "remove it or rebuild the plugin"));
  zt::PluginCatalog catalog({ZT_TEST_FIXTURE_DIR});
  try {
    catalog.load("comm_ucz");
    FAIL("expected PluginError");
  } catch (const zt::PluginError& e) {
    CHECK(contains(e.what(), "did you mean 'comm_ucx'?"));
    // The ids found, in id order: comm_ucx among them (after comm_nccl in a CUDA build).
    const std::string message = e.what();
    const size_t found = message.find("Found: ");
    REQUIRE(found != std::string::npos);
    CHECK(contains(message.substr(found, message.find(". ", found) - found), "comm_ucx"));
    CHECK(contains(e.what(), ZT_TEST_FIXTURE_DIR));
    CHECK(contains(e.what(), "ZT_PLUGIN_PATH"));
  }
  // Search folders that could not be searched say why: missing (a relative one under the
  // current directory, which a job started elsewhere does not share), or not a folder.
  zt::test::write_file(dir.file("plain"), "x");
  zt::PluginCatalog unsearched({dir.file("absent"), "relative/absent", dir.file("plain")});
  CHECK(unsearched.unsearched_reason(dir.file("absent")) == "missing");
  CHECK(unsearched.unsearched_reason(dir.file("plain")) == "not a folder");
  CHECK(
      contains(unsearched.unsearched_reason("relative/absent"),
               "missing under the current directory " + std::filesystem::current_path().string()));
  CHECK(unsearched.unsearched_reason(zt::builtin_plugin_dir()).empty());
  const std::string none = zt::test::error_of<zt::PluginError>([&] { unsearched.load("comm_x"); });
  CHECK_MESSAGE(contains(none, dir.file("absent") + " (missing)"), none);
  CHECK_MESSAGE(contains(none, dir.file("plain") + " (not a folder)"), none);
}

TEST_CASE("load_all reports each broken plugin without stopping at the first") {
  zt::PluginCatalog catalog({ZT_TEST_FIXTURE_DIR});
  int broken = 0, good = 0;
  for (const auto& entry : catalog.load_all()) {
    if (entry.record) good++;
    else broken++;
  }
  CHECK(broken == 10);  // not_elf, no_info, wrong_abi, wrong_fingerprint, throwing_factory,
                        // undefined_symbol, newer_sdk_symbol, mismatched_kind, unknown_kind,
                        // bad_option_specs
  CHECK(good >= 2);     // shard_fixture and comm_ucx (built-in)
}

TEST_CASE("ZT_PLUGIN_PATH is searched after plugins.dirs and before the built-in folder") {
  // The caller's own ZT_PLUGIN_PATH comes back after (later cases search it).
  const char* was = std::getenv("ZT_PLUGIN_PATH");
  const std::optional<std::string> before = was ? std::optional<std::string>(was) : std::nullopt;
  setenv("ZT_PLUGIN_PATH", "/tmp/zt-a:/tmp/zt-b", 1);
  zt::PluginCatalog catalog({"/tmp/zt-config"});
  if (before) {
    setenv("ZT_PLUGIN_PATH", before->c_str(), 1);
  } else {
    unsetenv("ZT_PLUGIN_PATH");
  }
  auto dirs = catalog.search_dirs();
  REQUIRE(dirs.size() == 4);
  CHECK(dirs[0] == "/tmp/zt-config");
  CHECK(dirs[1] == "/tmp/zt-a");
  CHECK(dirs[2] == "/tmp/zt-b");
  CHECK(dirs[3] == zt::builtin_plugin_dir());
}
