// The config loader: parsing, schema validation with file:line:column, overrides, plugin
// tables validated against the plugin's own options, and combinations.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/config.h"
#include "zt/host/engine_settings.h"

using zt::test::contains;

namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    zt::Config::load_string(toml, "job.toml", overrides);
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "";
}

const char* kSmoke = "[run]\ntask = \"smoke\"\n";

}  // namespace

TEST_CASE("an empty smoke config resolves every key to its default") {
  zt::Config c = zt::Config::load_string(kSmoke, "job.toml");
  CHECK(c.section("zero").get_int("stage") == 0);
  CHECK(c.section("launch").get_double("timeout_s") == 120.0);
  CHECK(c.section("plugins").get_string("comm") == "comm_ucx");
  CHECK(c.plugin_options("comm_ucx").get_int("chunk_kb") == 1024);
  CHECK(c.selected_plugins().size() == 1);
}

TEST_CASE("malformed TOML names file:line:column") {
  std::string e = error_of("[run]\ntask = \"smoke\"\nsteps = = 3\n");
  CHECK(contains(e, "job.toml:3:"));
  CHECK(contains(e, "malformed TOML"));
}

TEST_CASE("a DeepSpeed JSON given as the config is named as JSON, with the way to give it") {
  std::string e = error_of(
      "\n  {\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 3}}\n");
  CHECK_MESSAGE(contains(e, "job.toml:1: this is JSON, not a zt TOML config"), e);
  CHECK_MESSAGE(contains(e, "--deepspeed job.toml --config"), e);
  CHECK_MESSAGE(!contains(e, "fix the syntax"), e);
  // TOML that is malformed elsewhere keeps the syntax message.
  e = error_of("[run]\ntask = {\n");
  CHECK_MESSAGE(contains(e, "malformed TOML"), e);
}

TEST_CASE("a non-ASCII character where TOML++ 3.3 classifies whitespace is a syntax error") {
  // A fuzz finding (tests/fuzz/corpus/config_toml/): U+0225 at the start of a line reached
  // TOML++'s "unreachable" Unicode table entries; now the parser says what it saw, and where.
  std::string e = error_of("[run]\ntask = \"smoke\"\n\xc8\xa5 = 1\n");
  CHECK_MESSAGE(contains(e, "job.toml:3:1"), e);
  CHECK_MESSAGE(contains(e, "malformed TOML"), e);
  e = error_of("[run]\ntask = \"smoke\"\nsteps = 3\xe3\x80\x80\xe2\xb1\xb0\n");
  CHECK_MESSAGE(contains(e, "malformed TOML"), e);
}

TEST_CASE("unknown keys and sections get a did-you-mean with their location") {
  std::string e = error_of(std::string(kSmoke) + "[zero]\nstgae = 2\n");
  CHECK(contains(e, "job.toml:4:1: unknown key 'stgae' in [zero] (did you mean 'stage'?)"));
  e = error_of(std::string(kSmoke) + "[zeroo]\nstage = 2\n");
  CHECK(contains(e, "unknown section [zeroo] (did you mean 'zero'?)"));
  e = error_of(std::string(kSmoke) + "[plugin.comm_ucx]\nchunk_k = 64\n");
  CHECK(contains(
      e, "job.toml:4:1: unknown key 'chunk_k' in [plugin.comm_ucx] (did you mean 'chunk_kb'?)"));
  CHECK(contains(e, "trainer plugins describe comm_ucx"));
  e = error_of("stage = 3\n");
  CHECK(contains(e, "job.toml:1:1: key 'stage' is outside any section"));
}

TEST_CASE("wrong types and out-of-range values are reported, all of them at once") {
  std::string e = error_of(std::string(kSmoke) +
                           "[zero]\nstage = \"three\"\n[launch]\nnproc = 0\n");
  CHECK(contains(e, "job.toml:4:9: zero.stage must be an integer, got string \"three\""));
  CHECK(contains(e, "job.toml:6:9: launch.nproc = 0 is out of range"));
  e = error_of(std::string(kSmoke) + "[plugin.comm_ucx]\nchunk_kb = 1\n");
  CHECK(contains(e, "plugin.comm_ucx.chunk_kb = 1 is out of range"));
}

TEST_CASE("--set overrides apply after the file, with bare words as strings") {
  zt::Config c = zt::Config::load_string(
      std::string(kSmoke) + "[zero]\nstage = 1\n", "job.toml",
      {"zero.stage=0", "run.name=my-run", "plugin.comm_ucx.chunk_kb=64",
       "plugins.dirs=[\"/nonexistent\"]"});
  CHECK(c.section("zero").get_int("stage") == 0);
  CHECK(c.section("zero").where("stage").str() == "--set zero.stage=0");
  CHECK(c.section("run").get_string("name") == "my-run");
  CHECK(c.plugin_options("comm_ucx").get_int("chunk_kb") == 64);
  CHECK(c.section("plugins").get_string_list("dirs") == std::vector<std::string>{"/nonexistent"});
  // Words that TOML reads as a number, a boolean or a date are those words for a string key;
  // a number key still refuses words.
  zt::Config words = zt::Config::load_string(
      kSmoke, "job.toml", {"run.name=2024", "launch.master_addr=1e5", "run.out_dir=true"});
  CHECK(words.section("run").get_string("name") == "2024");
  CHECK(words.section("launch").get_string("master_addr") == "1e5");
  CHECK(words.section("run").get_string("out_dir") == "true");
  std::string e;
  CHECK(contains(error_of(kSmoke, {"zero.stage=two"}), "--set zero.stage=two"));
  // Bytes that are not UTF-8 (a Latin-1 file name) are refused, named, before they train: every
  // checkpoint's JSON refused them after.
  e = error_of(kSmoke, {"run.out_dir=runs/caf\xe9"});
  CHECK(contains(e, "--set run.out_dir=runs/caf\xef\xbf\xbd: the value is not UTF-8 text"));
  CHECK(contains(e, "rename the file, or link it under a UTF-8 name"));
  CHECK(error_of(kSmoke, {"run.out_dir=runs/caf\xc3\xa9"}).empty());  // the same name in UTF-8
  e = error_of(kSmoke, {"zero.stge=2"});
  CHECK(contains(e, "--set zero.stge=2: unknown key 'stge' in [zero] (did you mean 'stage'?)"));
  e = error_of(kSmoke, {"stage"});
  CHECK(contains(e, "expected section.key=value"));
}

TEST_CASE("[precision], [launch] and [zero] keys reach the engine's options where they act") {
  // Keys whose effect a CPU job cannot show (the loss scaler acts in fp16 only, on a GPU) or
  // shows only in its timing: each set to a value unlike its default and unlike the others.
  const zt::EngineSettings s = zt::EngineSettings::of(zt::Config::load_string(
      std::string(kSmoke) +
          "[precision]\ninitial_scale = 1024\nmin_scale = 2\nmax_scale = 4096\n"
          "growth_factor = 3\nbackoff_factor = 0.25\ngrowth_interval = 7\nhysteresis = 5\n"
          "[launch]\nmaster_addr = \"10.1.2.3\"\nflight_records = 99\n"
          "[zero]\nstage = 2\ngradient_predivide_factor = 4\n",
      "job.toml"));
  const zt::LossScalerOptions& scaler = s.options.scaler;
  CHECK(scaler.initial_scale == 1024);
  CHECK(scaler.min_scale == 2);
  CHECK(scaler.max_scale == 4096);
  CHECK(scaler.growth_factor == 3);
  CHECK(scaler.backoff_factor == 0.25);
  CHECK(scaler.growth_interval == 7);
  CHECK(scaler.hysteresis == 5);
  CHECK(s.launch.master_addr == "10.1.2.3");
  CHECK(s.launch.flight_records == 99);
  CHECK(s.options.gradient_predivide_factor == 4);
}

TEST_CASE("plugin selections must exist and be of the right kind") {
  std::string e = error_of(std::string(kSmoke) + "[plugins]\ncomm = \"comm_ucz\"\n");
  CHECK(contains(e, "job.toml:4:8: plugin 'comm_ucz' not found (did you mean 'comm_ucx'?)"));
  CHECK(contains(e, "Found: "));
  CHECK(contains(e, "Looked in: "));
  e = error_of(std::string(kSmoke) + "[plugins]\ndirs = [\"" ZT_TEST_FIXTURE_DIR
                                     "\"]\nshard = \"comm_ucx\"\n");
  CHECK(contains(
      e,
      "plugins.shard = \"comm_ucx\" names a comm plugin, but plugins.shard needs a shard plugin"));
  CHECK(contains(e, "(available: shard_bucket, shard_fixture, shard_tensor)"));
  e = error_of(std::string(kSmoke) + "[plugin.shard_buckett]\nbucket_mb = 3\n");
  CHECK(contains(
      e, "[plugin.shard_buckett] configures plugin 'shard_buckett', which is not installed"));
}

TEST_CASE("a plugin that is found but cannot be used fails the config, naming the file") {
  std::string e = error_of(std::string(kSmoke) + "[plugins]\ndirs = [\"" ZT_TEST_FIXTURE_DIR
                                                 "\"]\ncomm = \"wrong_abi\"\n");
  CHECK(contains(e, "libzt_wrong_abi.so was built for zt plugin ABI"));
}

TEST_CASE("combinations that cannot work are refused") {
  std::string e = error_of(std::string(kSmoke) +
                           "[zero]\nstage = 2\n[plugins]\noffload_param = \"offload_cpu\"\n");
  CHECK(contains(e, "plugins.offload_param = \"offload_cpu\" needs zero.stage = 3"));
  e = error_of("[run]\ntask = \"train\"\n[zero]\nstage = 1\n");
  CHECK(contains(e, "run.task = \"train\" needs plugins.optimizer"));
  CHECK(contains(e, "zero.stage = 1 needs plugins.shard"));
  e = error_of(std::string(kSmoke) + "[precision]\ncompute = \"fp16\"\n");
  CHECK(contains(e, "job.toml:4:11: precision.compute = \"fp16\" needs the engine on a GPU"));
  // launch.device = "cuda" does not move the engine: fp16 is refused there too, saying so.
  e = error_of(std::string(kSmoke) +
               "[launch]\ndevice = \"cuda\"\n[precision]\ncompute = \"fp16\"\n");
  CHECK(contains(e, "job.toml:6:11: precision.compute = \"fp16\" needs the engine on a GPU"));
  CHECK(contains(e, "pins the offload tiers' host memory only"));
}

TEST_CASE("every core rule across keys is tested alone: a config breaking only it gets only its "
          "message") {
  struct Broken {
    std::string toml;
    std::string says;
  };
  const std::map<std::string, Broken> cases = {
      {"offload_param needs stage 3",
       {"[zero]\nstage = 2\n[plugins]\noffload_param = \"offload_cpu\"\n",
        "job.toml:6:17: plugins.offload_param = \"offload_cpu\" needs zero.stage = 3"}},
      {"offload_optimizer needs stage 1",
       {"[plugins]\noffload_optimizer = \"offload_cpu\"\n",
        "job.toml:4:21: plugins.offload_optimizer needs zero.stage >= 1"}},
      {"shard groups need stage 1",
       {"[zero]\nshard_group_size = 2\n", "zero.shard_group_size = 2 needs zero.stage >= 1"}},
      {"mics_shard_size and shard_group_size agree",
       {"[zero]\nstage = 1\nmics_shard_size = 2\nshard_group_size = 4\n",
        "contradicts zero.mics_shard_size = 2"}},
      {"training needs an optimizer, and a shard strategy from stage 1",
       {"[zero]\nstage = 1\n[plugins]\nshard = \"shard_tensor\"\n",
        "run.task = \"train\" needs plugins.optimizer"}},
      {"fp16 needs a GPU engine",
       {"[precision]\ncompute = \"fp16\"\n",
        "precision.compute = \"fp16\" needs the engine on a GPU"}},
      {"the loss scaler's bounds agree",
       {"[precision]\nmin_scale = 0.0\n",
        "job.toml:4:13: precision.min_scale = 0.000000 must be > 0"}},
      {"codecs need their stage",
       {"[zero]\nstage = 2\n[plugins]\ncodec_weights = \"codec_blockq\"\n",
        "job.toml:6:17: plugins.codec_weights needs zero.stage = 3 (stage is 2 at job.toml:4:9)"}}};
  std::set<std::string> names;
  for (const zt::ConfigRule& rule : zt::config_rules()) {
    names.insert(rule.name);
    CAPTURE(rule.name);
    REQUIRE(cases.count(rule.name) == 1);  // a new rule gets its case here
    const Broken& b = cases.at(rule.name);
    // The training rule needs the train task; every other case runs the smoke task.
    const std::string task = rule.name.rfind("training", 0) == 0 ? "train" : "smoke";
    const std::string e = error_of("[run]\ntask = \"" + task + "\"\n" + b.toml);
    CHECK(contains(e, b.says));
    CHECK(e.find('\n') == std::string::npos);  // that message alone
  }
  CHECK(names.size() == cases.size());
}

TEST_CASE("the printed config reads back as the same configuration") {
  zt::Config c = zt::Config::load_string(std::string(kSmoke) + "[zero]\nstage = 0\n", "job.toml",
                                         {"plugin.comm_ucx.chunk_kb=64"});
  std::string printed = c.to_toml();
  CHECK(contains(printed, "[zero]\nstage = 0\n"));
  CHECK(contains(printed, "reduce_bucket_mb = 25.0  # default"));
  CHECK(contains(printed, "[plugin.comm_ucx]\nchunk_kb = 64\n"));
  zt::Config again = zt::Config::load_string(printed, "printed.toml");
  auto body = [](std::string text) {  // drop the header line and the "# default" markers
    text = text.substr(text.find('\n'));
    for (size_t p; (p = text.find("  # default")) != std::string::npos;) text.erase(p, 11);
    return text;
  };
  CHECK(body(again.to_toml()) == body(printed));
  CHECK(again.plugin_options("comm_ucx").get_int("chunk_kb") == 64);
  CHECK(again.section("precision").get_double("initial_scale") == 4294967296.0);
}

TEST_CASE("a printed config reads its defaults back as defaults, and an edited one as set") {
  // (data.token_dtype works this way: unset, a prepared file's index gives the width.)
  const zt::Config c = zt::Config::load_string(kSmoke, "job.toml");
  const std::string printed = c.to_toml();
  REQUIRE(contains(printed, "\nreduce_bucket_mb = 25.0  # default\n"));
  // Unset, as in the run that printed it.
  const zt::Config again = zt::Config::load_string(printed, "printed.toml");
  CHECK_FALSE(again.section("zero").is_set("reduce_bucket_mb"));
  CHECK(again.section("zero").get_double("reduce_bucket_mb") == 25.0);
  CHECK(again.to_toml().substr(again.to_toml().find('\n')) == printed.substr(printed.find('\n')));
  // A value changed where the marker stayed is the user's: set.
  std::string edited = printed;
  const std::string from = "reduce_bucket_mb = 25.0  # default";
  edited.replace(edited.find(from), from.size(), "reduce_bucket_mb = 50.0  # default");
  const zt::Config mine = zt::Config::load_string(edited, "edited.toml");
  CHECK(mine.section("zero").is_set("reduce_bucket_mb"));
  CHECK(mine.section("zero").get_double("reduce_bucket_mb") == 50.0);
  // A default's value written without the marker is set, as any key a file gives.
  const zt::Config plain = zt::Config::load_string(
      std::string(kSmoke) + "[zero]\nreduce_bucket_mb = 25.0\n", "j.toml");
  CHECK(plain.section("zero").is_set("reduce_bucket_mb"));
}

TEST_CASE("a missing config file is a clear error") {
  CHECK_THROWS_WITH_AS(zt::Config::load_file("/nonexistent/zt.toml"),
                       doctest::Contains("cannot read config file '/nonexistent/zt.toml'"),
                       zt::ConfigError);
}

TEST_CASE("a folder given as the config file is refused, not read as an empty config") {
  // A folder opens as a stream that reads nothing: `--config configs/` trained the defaults' job.
  CHECK_THROWS_WITH_AS(zt::Config::load_file(ZT_TEST_SOURCE_DIR "/configs/"),
                       doctest::Contains("/configs/' is a folder, not a config file; pass a "
                                         ".toml file to --config"),
                       zt::ConfigError);
  CHECK_THROWS_AS(zt::Config::peek_file(ZT_TEST_SOURCE_DIR "/configs", {}, "run", "name"),
                  zt::ConfigError);
}

TEST_CASE("zero.mics_shard_size: refused at stage 0, and its two names must agree") {
  const std::string at_stage0 = error_of(std::string(kSmoke) + "[zero]\nmics_shard_size = 2\n");
  CHECK(contains(at_stage0, "job.toml:4"));
  CHECK(contains(at_stage0, "zero.mics_shard_size = 2 needs zero.stage >= 1"));
  const std::string both = error_of(std::string(kSmoke) + "[zero]\nstage = 3\nmics_shard_size = 2\n"
                                                          "shard_group_size = 4\n");
  CHECK(contains(both, "job.toml:6"));
  CHECK(contains(both, "contradicts zero.mics_shard_size = 2 at job.toml:5"));
  CHECK(error_of(std::string(kSmoke) + "[zero]\nstage = 1\nshard_group_size = 2\n"
                                       "mics_shard_size = 2\n")
            .empty());
  CHECK(contains(error_of(std::string(kSmoke) + "[zero]\nstage = 1\nmics_shard_size = -2\n"),
                 "mics_shard_size"));
}

TEST_CASE("zero.mics_shard_size: a printed config holds its two names once, and reads back with "
          "either overridden") {
  auto print = [](const std::string& zero) {
    return zt::Config::load_string(std::string(kSmoke) + "[zero]\nstage = 3\n" + zero, "job.toml")
        .to_toml();
  };
  // Given as shard_group_size: printed under mics_shard_size, the value kept.
  const std::string given_alias = print("shard_group_size = 2\n");
  CHECK(contains(given_alias, "\nmics_shard_size = 2  # given as shard_group_size\n"));
  CHECK_FALSE(contains(given_alias, "shard_group_size ="));
  const std::string defaults = print("");
  CHECK(contains(defaults, "\nmics_shard_size = -1  # default\n"));
  CHECK_FALSE(contains(defaults, "shard_group_size ="));
  // An override of either name replaces the file's other name; two overrides must still agree.
  const std::string file = std::string(kSmoke) + "[zero]\nstage = 3\nmics_shard_size = 2\n";
  CHECK(
      zt::EngineSettings::of(zt::Config::load_string(file, "job.toml", {"zero.shard_group_size=4"}))
          .groups.size == 4);
  CHECK_THROWS_WITH_AS(zt::Config::load_string(
                           file, "job.toml", {"zero.shard_group_size=4", "zero.mics_shard_size=1"}),
                       doctest::Contains("they name one setting"), zt::ConfigError);
  const std::vector<std::pair<std::string, int64_t>> printed_sizes = {
      {given_alias, 2}, {defaults, -1}, {print("mics_shard_size = 0\n"), 0}};
  for (const auto& [printed, size] : printed_sizes) {
    CAPTURE(printed);
    const zt::Config back = zt::Config::load_string(printed, "printed.toml");
    CHECK(zt::EngineSettings::of(back).groups.size == size);
    // What a live A/B arm or tune's MiCS candidate does: either name over the printed config.
    for (const char* over : {"zero.mics_shard_size=0", "zero.shard_group_size=0"}) {
      CAPTURE(over);
      const zt::Config arm = zt::Config::load_string(printed, "printed.toml", {over});
      CHECK(zt::EngineSettings::of(arm).groups.size == 0);
    }
  }
}

TEST_CASE("codecs: each role's table is validated against its codec, and misplaced ones refused") {
  const std::string base = "[run]\ntask = \"smoke\"\n[zero]\nstage = 3\n[plugins]\n"
                           "codec_weights = \"codec_blockq\"\ncodec_gradients = \"codec_blockq\"\n";
  zt::Config c = zt::Config::load_string(base + "[codec.weights]\nbits = 8\n[codec.gradients]\n"
                                                "bits = 4\nblock = 64\n",
                                         "job.toml", {"codec.weights.block=128"});
  CHECK(c.codec_options("weights").get_int("bits") == 8);
  CHECK(c.codec_options("weights").get_int("block") == 128);
  CHECK(c.codec_options("gradients").get_int("bits") == 4);
  CHECK(c.codec_options("gradients").get_int("block") == 64);
  const std::string printed = c.to_toml();
  CHECK(contains(printed, "[codec.weights]\nbits = 8\nblock = 128\n"));
  CHECK(zt::Config::load_string(printed, "printed.toml")
            .codec_options("gradients")
            .get_int("block") == 64);
  // A key the codec does not declare, with the place and a did-you-mean.
  CHECK(contains(error_of(base + "[codec.gradients]\nbitz = 4\n"),
                 "job.toml:9:1: unknown key 'bitz' in [codec.gradients] (did you mean 'bits'?)"));
  // A value the codec refuses at create() is the codec's (tested with the plugin); a range is
  // the loader's.
  CHECK(contains(error_of(base + "[codec.weights]\nbits = 16\n"), "codec.weights.bits"));
  // A table for a role no codec serves.
  CHECK(contains(error_of(std::string(kSmoke) + "[codec.gradients]\nbits = 4\n"),
                 "[codec.gradients] configures the gradients codec, but plugins.codec_gradients "
                 "names none"));
  // A codec's options in a [plugin.<id>] table.
  CHECK(contains(error_of(base + "[plugin.codec_blockq]\nbits = 4\n"),
                 "[plugin.codec_blockq] configures codec codec_blockq, whose options go in the "
                 "table of the role it serves"));
  // A role that is not one.
  CHECK(contains(error_of(std::string(kSmoke) + "[codec.activations]\nbits = 4\n"),
                 "unknown section [codec.activations]"));
  // A plugin of another kind.
  CHECK(contains(
      error_of(base, {"plugins.codec_gradients=comm_ucx"}),
      "plugins.codec_gradients = \"comm_ucx\" names a comm plugin, but "
      "plugins.codec_gradients needs a codec plugin (available: codec_bf16, codec_blockq)"));
  // Error feedback without a gradient codec, and a gradient codec at stage 0.
  CHECK(contains(error_of(std::string(kSmoke) + "[zero]\nstage = 1\ncodec_error_feedback = true\n"),
                 "zero.codec_error_feedback needs plugins.codec_gradients"));
  CHECK(contains(error_of(std::string(kSmoke) + "[plugins]\ncodec_gradients = \"codec_blockq\"\n"),
                 "plugins.codec_gradients needs zero.stage >= 1"));
}

TEST_CASE("an infinite number is refused for any numeric option, naming it") {
  for (const char* set : {"zero.reduce_bucket_mb=inf", "launch.timeout_s=-inf"}) {
    CAPTURE(set);
    try {
      zt::Config::load_string(kSmoke, "job.toml", {set});
      FAIL("accepted " << set);
    } catch (const zt::ConfigError& e) {
      CHECK(contains(e.what(), "is not a finite number"));
      CHECK(contains(e.what(), std::string(set).substr(0, std::string(set).find('='))));
    }
  }
}

TEST_CASE("the loss scaler's bounds: an overflow must shrink the scale, which stays in range") {
  const std::string base = std::string(kSmoke) + "[precision]\n";
  CHECK(contains(error_of(base + "backoff_factor = 1.0\n"),
                 "precision.backoff_factor = 1.000000 must be between 0 and 1, both excluded"));
  CHECK(contains(error_of(base + "backoff_factor = 0.0\n"), "both excluded"));
  CHECK(contains(error_of(base + "max_scale = 65536.0\n"),
                 "precision.initial_scale = 4294967296.000000 is outside [min_scale, "
                 "max_scale] = [1.000000, 65536.000000]"));
  CHECK(contains(error_of(base + "min_scale = 8.0\nmax_scale = 4.0\n"),
                 "precision.min_scale = 8.000000 is above precision.max_scale = 4.000000"));
  CHECK_NOTHROW(
      zt::Config::load_string(base + "max_scale = 65536.0\ninitial_scale = 1024.0\n", "job.toml"));
}

TEST_CASE("byte sizes stay within what int64 counts") {
  CHECK_THROWS_WITH_AS(zt::Config::load_string(kSmoke, "job.toml", {"zero.reduce_bucket_mb=1e13"}),
                       doctest::Contains("zero.reduce_bucket_mb"), zt::ConfigError);
  CHECK_THROWS_AS(zt::Config::load_string(kSmoke, "job.toml", {"launch.memory_limit_gb=1e10"}),
                  zt::ConfigError);
}
