// The trainer's settings: its sections are declared by the trainer (the core's schema alone does
// not know them), each of its rules across keys refuses a config that breaks only it with only its
// message, and JobSettings resolves every default and derived value once (the checkpoint folder,
// the A/B switch folder, the decay length, the token size, the global batch check).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "settings/job_config.h"
#include "settings/job_settings.h"
#include "settings/model_keys.h"
#include "settings/plugin_tables.h"
#include "settings/trainer_config.h"
#include "zt/error.h"

using zt::trainer::JobSettings;
using zt::trainer::load_config_string;

namespace {

const char* kSmoke = "[run]\ntask = \"smoke\"\n";

std::string error_of(const std::string& toml) {
  try {
    load_config_string(toml, "job.toml");
  } catch (const zt::Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool has_section(const std::string& name) {
  for (const zt::SectionSpec& s : zt::config_schema()) {
    if (s.name == name) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the trainer declares its own sections: the core's schema has them only after") {
  // The first load through the trainer declares them; before it this process's schema is the
  // core's alone.
  CHECK_FALSE(has_section("model"));
  CHECK_FALSE(has_section("checkpoint"));
  const zt::Config c = load_config_string(kSmoke, "job.toml");
  for (const char* name : {"model", "data", "checkpoint", "ab"}) CHECK(has_section(name));
  CHECK(c.section("run").get_string("lr_schedule") == "constant");  // [run]'s lr keys
  CHECK(contains(c.to_toml(), "[checkpoint]"));
}

TEST_CASE("every trainer rule across keys is tested alone: only its message") {
  zt::trainer::declare_trainer_config();
  const std::map<std::string, std::pair<std::string, std::string>> cases = {
      {"model.kind plugin and plugins.model go together",
       {"[model]\nkind = \"plugin\"\n",
        "job.toml:4:8: model.kind = \"plugin\" needs plugins.model"}},
      {"a torchscript model needs model.path",
       {"[model]\nkind = \"torchscript\"\n", "model.kind = \"torchscript\" needs model.path"}},
      {"file data needs data.path",
       {"[data]\nkind = \"tokens\"\n", "job.toml:4:8: data.kind = \"tokens\" needs data.path"}},
      {"validation data is one of a file, a held-out share or a stream",
       {"[data]\nkind = \"text\"\npath = \"t.txt\"\n[eval]\nevery_steps = 5\n",
        "job.toml:7:15: eval.every_steps needs validation data: data.val_path"}},
      {"checkpoint.keep_best has a validation loss at every checkpoint",
       {"[checkpoint]\nevery_steps = 5\nkeep_best = \"val_loss\"\n",
        "job.toml:5:13: checkpoint.keep_best = \"val_loss\" ranks checkpoints by their "
        "validation loss, but eval.every_steps is 0"}},
      {"trace.steps is a range of steps",
       {"[trace]\nsteps = [3, 2]\n", "job.toml:4:9: trace.steps must be [first, last]"}}};
  std::set<std::string> seen;
  bool trainers = false;
  for (const zt::ConfigRule& rule : zt::config_rules()) {
    // The trainer's rules come after the core's (tested with the core): each one from the first
    // of them on needs a case here, so a rule added without one fails.
    trainers = trainers || cases.count(rule.name) > 0;
    if (!trainers) continue;
    CAPTURE(rule.name);
    REQUIRE(cases.count(rule.name) == 1);
    seen.insert(rule.name);
    CAPTURE(rule.name);
    const std::string e = error_of(std::string(kSmoke) + cases.at(rule.name).first);
    CHECK(contains(e, cases.at(rule.name).second));
    CHECK(e.find('\n') == std::string::npos);
  }
  CHECK(seen.size() == cases.size());
}

TEST_CASE("validation data: each way of getting it wrong is named with its place") {
  const std::string text = std::string(kSmoke) + "[data]\nkind = \"text\"\npath = \"t.txt\"\n";
  CHECK(contains(error_of(text + "val_fraction = 1.0\n"),
                 "job.toml:6:16: data.val_fraction must be below 1"));
  CHECK(contains(error_of(text + "val_fraction = 0.1\nval_path = \"v.txt\"\n"),
                 "data.val_fraction and data.val_path (job.toml:7:12) both name validation data"));
  CHECK(contains(error_of(std::string(kSmoke) + "[data]\nval_path = \"v.txt\"\n"),
                 "job.toml:4:12: synthetic data validates on a seeded stream of its own; remove "
                 "data.val_path"));
  CHECK(contains(error_of(text + "val_fraction = -0.1\n"), "val_fraction"));
  // Validation on a file the job trains on: the same path, or one of a blend's, in any spelling.
  CHECK(contains(error_of(text + "val_path = \"./t.txt\"\n"),
                 "job.toml:6:12: data.val_path names a file the job trains on (./t.txt)"));
  CHECK(contains(
      error_of(std::string(kSmoke) + "[data]\nkind = \"text\"\npaths = [\"a.txt\", \"t.txt\"]\n"
                                     "val_path = \"t.txt\"\n"),
      "data.val_path names a file the job trains on"));
  CHECK_FALSE(contains(error_of(text + "val_path = \"v.txt\"\n"), "trains on"));
  // Synthetic data needs nothing more; file data with a held-out share evaluates at the end.
  const JobSettings s = JobSettings::of(
      load_config_string(std::string(kSmoke) + "[eval]\nevery_steps = 3\n", "job.toml"));
  CHECK(s.eval.on());
  CHECK(s.eval.micro_batch == 4);  // data.micro_batch's default
  CHECK(s.eval.due(3, 10));
  CHECK_FALSE(s.eval.due(4, 10));
  CHECK(s.eval.due(10, 10));
  const JobSettings f = JobSettings::of(
      load_config_string(text + "val_fraction = 0.1\n", "job.toml"));
  CHECK(f.eval.on());
  CHECK_FALSE(f.eval.due(5, 10));
  CHECK(f.eval.due(10, 10));
  CHECK_FALSE(JobSettings::of(load_config_string(text, "job.toml")).eval.on());
}

TEST_CASE("checkpoint.keep_best: needs checkpoints that each have a validation loss") {
  const std::string text = std::string(kSmoke) + "[eval]\nevery_steps = 10\n[checkpoint]\n";
  CHECK(contains(error_of(text + "keep_best = \"val_loss\"\n"),
                 "job.toml:6:13: checkpoint.keep_best = \"val_loss\" needs checkpoints: set "
                 "checkpoint.every_steps (a multiple of eval.every_steps = 10)"));
  CHECK(contains(error_of(text + "keep_best = \"val_loss\"\nevery_steps = 15\n"),
                 "checkpoint.every_steps (15, job.toml:7:15) must be a multiple of "
                 "eval.every_steps (10, job.toml:4:15)"));
  CHECK(contains(error_of(text + "keep_best = \"accuracy\"\n"), "keep_best"));
  const JobSettings s = JobSettings::of(
      load_config_string(text + "keep_best = \"val_loss\"\nevery_steps = 20\n", "job.toml"));
  CHECK(s.checkpoint.keep_best == "val_loss");
  CHECK(contains(s.checkpoint.describe(), "keep last 2 and the best val_loss"));
}

TEST_CASE("JobSettings resolves the defaults and derived values once") {
  const JobSettings d = JobSettings::of(
      load_config_string(std::string(kSmoke) + "steps = 40\nout_dir = \"runs/x\"\n"
                                               "lr_schedule = \"cosine\"\nwarmup_steps = 5\n",
                         "job.toml"));
  CHECK(d.checkpoint.dir == "runs/x/checkpoints");
  CHECK(d.ab.switch_dir == "runs/x/ab-switch");
  CHECK(d.schedule.total_steps == 40);  // decay_steps 0: the run's steps
  CHECK(d.schedule.warmup_steps == 5);
  CHECK(d.data.element_size == 1);
  CHECK(d.data.samples_per_step(3) == 4 * 1 * 3);

  const JobSettings e = JobSettings::of(load_config_string(
      std::string(kSmoke) +
          "decay_steps = 7\n[checkpoint]\ndir = \"/ckpt\"\ntimeout_s = 2.5\n[ab]\nswitch_dir = "
          "\"/sw\"\n[data]\nkind = \"tokens\"\npath = \"t.bin\"\ntoken_dtype = \"uint32\"\n"
          "micro_batch = 2\ngrad_accum = 3\nglobal_batch = 12\n",
      "job.toml"));
  CHECK(e.checkpoint.dir == "/ckpt");
  CHECK(e.checkpoint.timeout.count() == 2500);
  CHECK(e.ab.switch_dir == "/sw");
  CHECK(e.schedule.total_steps == 7);
  CHECK(e.data.element_size == 4);
  CHECK_NOTHROW(e.data.check_global_batch(2));
  const std::string m = [&] {
    try {
      e.data.check_global_batch(3);
    } catch (const zt::ConfigError& err) {
      return std::string(err.what());
    }
    return std::string();
  }();
  CHECK(contains(m, "job.toml:15:"));
  CHECK(contains(m, "data.global_batch = 12 does not equal micro_batch (2) x grad_accum (3) x "
                    "ranks (3) = 18"));

  // A blend: its files and their odds, as given (the blend's draw is tested on DataSettings).
  const JobSettings blend = JobSettings::of(load_config_string(
      std::string(kSmoke) + "[data]\nkind = \"tokens\"\npaths = [\"a.bin\", \"b.bin\"]\n"
                            "weights = [0.7, 0.3]\n",
      "job.toml"));
  CHECK(blend.data.paths == std::vector<std::string>{"a.bin", "b.bin"});
  CHECK(blend.data.weights == std::vector<double>{0.7, 0.3});
}

TEST_CASE(
    "a job read back from its resolved config (eval, sample, A/B arms) keeps defaults unset") {
  const JobSettings job = JobSettings::of(load_config_string(
      std::string(kSmoke) + "[data]\nkind = \"tokens\"\npath = \"t.bin\"\n", "job.toml"));
  CHECK_FALSE(job.data.token_dtype_set);
  // As the run that printed it: a prepared file's index may still give its width.
  const JobSettings again = JobSettings::with_overrides(job, {});
  CHECK_FALSE(again.data.token_dtype_set);
  CHECK(again.data.element_size == 2);
  // An error in it names the resolved text, not the user's file and a line it does not have.
  const std::string m = [&] {
    try {
      JobSettings::with_overrides(job, {"zero.stage=9"});
    } catch (const zt::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK(m.find("zero.stage") != std::string::npos);
  const JobSettings twice = JobSettings::with_overrides(again, {});
  CHECK(twice.config_source == "the resolved configuration of job.toml (trainer --print-config)");
}

TEST_CASE("sizes and counts that later products would overflow are refused where they are set") {
  for (const std::string& line :
       {std::string("[model]\nd_model = 4294967296\n"),
        std::string("[model]\nwidth = 4294967296\n"), std::string("[eval]\nbatches = 4294967296\n"),
        std::string("[eval]\nmicro_batch = 4294967296\n")}) {
    CAPTURE(line);
    CHECK(contains(error_of(std::string(kSmoke) + line), "job.toml:"));
  }
  CHECK(contains(error_of(std::string(kSmoke) + "[trace]\nsteps = [1, 1e300]\n"),
                 "trace.steps must be [first, last], whole steps with 1 <= first <= last <= 2^53"));
  CHECK(error_of(std::string(kSmoke) + "[trace]\nsteps = [2, 4]\n").empty());
}

TEST_CASE("a string with control characters prints as TOML that reads back the same") {
  const zt::Config c = load_config_string(
      std::string(kSmoke) + "name = \"a\\nb\\tc\\u0001\\\"d\"\n", "job.toml");
  const std::string name = c.section("run").get_string("name");
  CHECK(name == "a\nb\tc\x01\"d");
  const zt::Config again = load_config_string(c.to_toml(), "printed.toml");
  CHECK(again.section("run").get_string("name") == name);
}

TEST_CASE("[model] keys the model's kind does not read are named, with their place and way out") {
  using zt::trainer::unused_model_keys;
  // An MLP with GPT sizes (after kSmoke's two lines): both named, each at its line, with the kind's
  // own place.
  std::vector<std::string> lines = unused_model_keys(load_config_string(
      std::string(kSmoke) + "[model]\nkind = \"mlp\"\nn_layer = 24\nwidth = 512\nd_model = 64\n",
      "job.toml"));
  REQUIRE(lines.size() == 2);
  INFO(lines[0]);
  INFO(lines[1]);
  CHECK(contains(lines[0], "job.toml:7:11: model.d_model is a key of model kind 'gpt', and this "
                           "job's model is 'mlp' (model.kind = \"mlp\" at job.toml:4:8)"));
  CHECK(contains(lines[0], "remove model.d_model, or set model.kind to \"gpt\""));
  CHECK(contains(lines[1], "job.toml:5:11: model.n_layer is a key of model kind 'gpt'"));
  // The default kind is a GPT: an MLP key under it says so.
  lines = unused_model_keys(
      load_config_string(std::string(kSmoke) + "[model]\nwidth = 512\n", "job.toml"));
  REQUIRE(lines.size() == 1);
  CHECK(contains(lines[0], "model.kind is not set, so it is \"gpt\""));
  // A key of two kinds names both; under either it is read.
  lines = unused_model_keys(load_config_string(
      std::string(kSmoke) + "[model]\nkind = \"mlp\"\nseq_len = 64\n", "job.toml"));
  REQUIRE(lines.size() == 1);
  CHECK(contains(lines[0], "model kinds 'gpt' and 'torchscript'"));
  CHECK(unused_model_keys(load_config_string(
                              std::string(kSmoke) +
                                  "[model]\nkind = \"torchscript\"\npath = \"m.pt\"\nseq_len = 64\n"
                                  "vocab = 256\n",
                              "job.toml"))
            .empty());
  // --set changing the kind over a file written for another says itself that the file's keys
  // go unused; a key --set gives for another kind is named all the same.
  lines = unused_model_keys(
      load_config_string(std::string(kSmoke) + "[model]\nn_layer = 2\nd_model = 64\n", "job.toml",
                         {"model.kind=mlp", "model.width=128", "model.vocab=512"}));
  REQUIRE(lines.size() == 1);
  CHECK(contains(lines[0], "--set model.vocab=512: model.vocab is a key of model kinds 'gpt' and "
                           "'torchscript', and this job's model is 'mlp' (model.kind = \"mlp\" at "
                           "--set model.kind=mlp)"));
  // Defaults are not the user's: a config that sets nothing of another kind has nothing to say,
  // and neither does its resolved text read back.
  const zt::Config mlp = load_config_string(
      std::string(kSmoke) + "[model]\nkind = \"mlp\"\nwidth = 64\n", "job.toml");
  CHECK(unused_model_keys(mlp).empty());
  CHECK(unused_model_keys(load_config_string(mlp.to_toml(), "printed.toml")).empty());
}

TEST_CASE("[plugin.<id>] tables no role selects are named, with their place and way out") {
  using zt::trainer::unused_plugin_tables;
  // The states go to NVMe, the parameters stay: offload_cpu's options are read by nobody.
  const std::string base = std::string(kSmoke) + "[zero]\nstage = 3\n" +
                           "[plugins]\noffload_optimizer = \"offload_nvme\"\n"
                           "[plugin.offload_nvme]\npath = \"nvme\"\n"
                           "[plugin.offload_cpu]\npin_memory = false\n";
  std::vector<std::string> lines = unused_plugin_tables(load_config_string(base, "job.toml"));
  REQUIRE(lines.size() == 1);
  INFO(lines[0]);
  CHECK(contains(lines[0], "job.toml:10:14: [plugin.offload_cpu] configures offload_cpu (an "
                           "offload plugin), which no role of [plugins] selects"));
  CHECK(contains(lines[0], "select it with plugins.offload_optimizer (now \"offload_nvme\") or "
                           "plugins.offload_param (none now), or remove the table"));
  // Selected by either role in the file, it is read.
  std::string selected = base;
  selected.insert(selected.find("[plugin.offload_nvme]"), "offload_param = \"offload_cpu\"\n");
  CHECK(unused_plugin_tables(load_config_string(selected, "job.toml")).empty());
  // An [ab] arm that selects it reads it.
  CHECK(unused_plugin_tables(
            load_config_string(base + "[ab]\narms = [\"plugins.offload_param=offload_cpu\", "
                                      "\"plugins.offload_param=\\\"\\\"\"]\n",
                               "job.toml"))
            .empty());
  // --set choosing an offload tier over the file (an arm's run, a test) says itself that the
  // file's other tier tables go unused.
  CHECK(unused_plugin_tables(
            load_config_string(base, "job.toml", {"plugins.offload_optimizer=offload_nvme"}))
            .empty());
  // A plugin's option that --set gives is a script's (a tier's path, whether or not the job
  // makes one): only the file's tables are named.
  const std::string no_table = std::string(kSmoke) + "[zero]\nstage = 3\n";
  CHECK(unused_plugin_tables(
            load_config_string(no_table, "job.toml", {"plugin.offload_nvme.path=/tmp/nvme"}))
            .empty());
  // A table of defaults alone (a selected plugin's, printed and read back) is nobody's words.
  const zt::Config printed = load_config_string(
      std::string(kSmoke) + "[zero]\nstage = 3\n[plugins]\noffload_param = \"offload_cpu\"\n",
      "job.toml");
  std::string text = printed.to_toml();
  const std::string chosen = "offload_param = \"offload_cpu\"";
  REQUIRE(contains(text, chosen));
  text.replace(text.find(chosen), chosen.size(), "offload_param = \"\"");
  CHECK(unused_plugin_tables(load_config_string(text, "printed.toml")).empty());
  // A name inside a longer one is not that plugin's.
  CHECK(unused_plugin_tables(
            load_config_string(base + "[ab]\narms = [\"plugin.offload_cpu2.x=1\"]\n", "job.toml"))
            .size() == 1);
}

TEST_CASE("a checkpoint read before any config is bounded by --set launch.timeout_s, else by its "
          "default") {
  using std::chrono::milliseconds;
  using zt::trainer::launch_timeout_before_config;
  const zt::OptionSpec* spec = zt::config_option("launch", "timeout_s");
  REQUIRE(spec);
  const milliseconds fallback(std::llround(std::get<double>(spec->default_value) * 1000));
  CHECK(fallback.count() > 0);
  CHECK(launch_timeout_before_config({}) == fallback);
  CHECK(launch_timeout_before_config({"launch.timeout_s=4"}) == milliseconds(4000));
  CHECK(launch_timeout_before_config({"run.steps=3", "launch.timeout_s=2.5"}) ==
        milliseconds(2500));
  // Not a valid value: the config's own check refuses it later, with its place; the default
  // bounds the reads before.
  CHECK(launch_timeout_before_config({"launch.timeout_s=soon"}) == fallback);
  CHECK(launch_timeout_before_config({"launch.timeout_s=-1"}) == fallback);
  // export loads no config that would refuse it later: refused there, naming the key.
  CHECK_THROWS_WITH_AS(launch_timeout_before_config({"launch.timeout_s=-1"}, true),
                       doctest::Contains("launch.timeout_s"), zt::ConfigError);
  CHECK_THROWS_AS(launch_timeout_before_config({"launch.timeout_s=soon"}, true), zt::ConfigError);
  CHECK(launch_timeout_before_config({"launch.timeout_s=600"}, true) == milliseconds(600000));
}
