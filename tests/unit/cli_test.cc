// The trainer's command-line parser and its help texts.
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "app/cli.h"
#include "app/help.h"
#include "zt/error.h"

using zt::trainer::Command;
using zt::trainer::parse_cli;

TEST_CASE("a run takes a config, overrides in order, --nproc and --print-config") {
  auto a = parse_cli({"--config", "c.toml", "--set", "zero.stage=2", "--set=run.steps=3", "--nproc",
                      "4", "--print-config"});
  CHECK(a.command == Command::kRun);
  CHECK(a.config_path == "c.toml");
  CHECK(a.overrides == std::vector<std::string>{"zero.stage=2", "run.steps=3"});
  REQUIRE(a.nproc.has_value());
  CHECK(*a.nproc == 4);
  CHECK(a.print_config);
}

TEST_CASE("--flag=value is --flag value for every flag; a flag of no value refuses one") {
  auto a = parse_cli({"--config=c.toml", "--nproc=4", "--resume=auto", "--max-restarts=2",
                      "--set=run.steps=3", "--plugin-dir=/p"});
  CHECK(a.config_path == "c.toml");
  REQUIRE(a.nproc.has_value());
  CHECK(*a.nproc == 4);
  CHECK(a.overrides == std::vector<std::string>{"checkpoint.resume=\"auto\"",
                                                "launch.max_restarts=2", "run.steps=3"});
  CHECK(a.plugin_dirs == std::vector<std::string>{"/p"});
  auto e = parse_cli({"export", "--checkpoint=runs/x", "--out=w.safetensors", "--dtype=bf16"});
  CHECK(e.checkpoint == "runs/x");
  CHECK(e.out_path == "w.safetensors");
  CHECK(e.dtype == "bf16");
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "c.toml", "--print-config=yes"}),
                       doctest::Contains("--print-config=yes: --print-config takes no value"),
                       zt::ConfigError);
}

TEST_CASE("a flag whose second value would mean another thing is refused twice; others take "
          "their last, and --set and --plugin-dir add up") {
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "a.toml", "--config", "b.toml"}),
                       doctest::Contains("--config given twice (a.toml, then b.toml)"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"-c", "a.toml", "--config=b.toml"}),
                       doctest::Contains("given twice"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"sample", "--checkpoint", "c", "--prompt", "A", "--prompt", "B"}),
                       doctest::Contains("--prompt given twice"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "c", "--resume", "auto", "--resume", "runs/x"}),
                       doctest::Contains("--resume given twice"), zt::ConfigError);
  auto a = parse_cli({"--config", "c", "--set", "a.b=1", "--set", "a.c=2", "--plugin-dir", "/x",
                      "--plugin-dir", "/y", "--nproc", "2", "--nproc", "4"});
  CHECK(a.overrides.size() == 2);
  CHECK(a.plugin_dirs.size() == 2);
  CHECK(*a.nproc == 4);
  // A wrapper's defaults, then the caller's: the last counts (tests/multiproc's sample helper).
  auto s = parse_cli({"sample", "--checkpoint", "c", "--seed", "5", "--seed", "6"});
  CHECK(s.sample.seed == 6);
}

TEST_CASE("values checked where they are typed: --max-restarts, an empty path, --rtol with "
          "--allow-different-math") {
  CHECK_THROWS_WITH_AS(
      parse_cli({"--config", "c", "--max-restarts", "2x"}),
      doctest::Contains("--max-restarts 2x: expected a whole number of at least 0"),
      zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"compare", "runs/a", "runs/b", "--out", ""}),
                       doctest::Contains("--out \"\": expected a path"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"--config", ""}), doctest::Contains("expected a path"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_cli({"compare", "runs/a", "runs/b", "--allow-different-math", "--rtol", "1e-3"}),
      doctest::Contains("--rtol with --allow-different-math"), zt::ConfigError);
  // --resume "" is a fresh start (a restarted live A/B job is given it).
  CHECK(parse_cli({"--config", "c", "--resume", ""}).overrides ==
        std::vector<std::string>{"checkpoint.resume=\"\""});
}

TEST_CASE("after --, arguments are files: a run folder or an input named with a leading '-'") {
  auto p = parse_cli({"prepare-data", "--out", "data/x", "--", "-notes.txt", "--weird"});
  CHECK(p.prepare.inputs == std::vector<std::string>{"-notes.txt", "--weird"});
  auto r = parse_cli({"report", "--", "-run"});
  CHECK(r.compare_runs == std::vector<std::string>{"-run"});
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "c", "--", "x"}),
                       doctest::Contains("'x' after --: trainer (training) takes no positional"),
                       zt::ConfigError);
}

TEST_CASE("eval and sample without --config read no DeepSpeed JSON, so refuse one") {
  CHECK_THROWS_WITH_AS(parse_cli({"eval", "--checkpoint", "c", "--deepspeed", "ds.json"}),
                       doctest::Contains("trainer eval without --config loads the config the "
                                         "checkpoint was saved with"),
                       zt::ConfigError);
  CHECK_THROWS_AS(parse_cli({"sample", "--checkpoint", "c", "--deepspeed-lenient"}),
                  zt::ConfigError);
  CHECK_NOTHROW(
      parse_cli({"eval", "--checkpoint", "c", "--config", "j.toml", "--deepspeed", "ds.json"}));
}

TEST_CASE("plugins subcommands") {
  CHECK(parse_cli({"plugins", "list"}).command == Command::kPluginsList);
  auto d = parse_cli({"plugins", "describe", "comm_ucx", "--plugin-dir", "/x"});
  CHECK(d.command == Command::kPluginsDescribe);
  CHECK(d.plugin_id == "comm_ucx");
  CHECK(d.plugin_dirs == std::vector<std::string>{"/x"});
}

TEST_CASE("--resume becomes the checkpoint.resume override, in its place among the --set") {
  auto a = parse_cli({"--config", "c.toml", "--set", "run.steps=3", "--resume", "auto"});
  CHECK(a.overrides == std::vector<std::string>{"run.steps=3", "checkpoint.resume=\"auto\""});
  // A folder named like a number is a path: unquoted, --set read 2024 as an integer.
  auto n = parse_cli({"--config", "c.toml", "--resume", "runs/2024"});
  CHECK(n.overrides == std::vector<std::string>{"checkpoint.resume=\"runs/2024\""});
  CHECK(parse_cli({"--config", "c.toml", "--resume", "1e5"}).overrides ==
        std::vector<std::string>{"checkpoint.resume=\"1e5\""});
}

TEST_CASE("export takes a checkpoint, an output file and a dtype") {
  auto e = parse_cli(
      {"export", "--checkpoint", "ck/step-00000004", "--out", "m.safetensors", "--dtype", "bf16"});
  CHECK(e.command == Command::kExport);
  CHECK(e.checkpoint == "ck/step-00000004");
  CHECK(e.out_path == "m.safetensors");
  CHECK(e.dtype == "bf16");
  CHECK(parse_cli({"export", "--checkpoint", "c", "--out", "o"}).dtype == "fp32");
  CHECK_THROWS_WITH_AS(parse_cli({"export", "--checkpoint", "c"}),
                       doctest::Contains("needs --checkpoint DIR and --out"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"export", "--checkpoint", "c", "--out", "o", "--dtype", "int8"}),
                       doctest::Contains("--dtype int8"), zt::ConfigError);
  // --checkpoint means nothing to a training run.
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "c", "--checkpoint", "x"}),
                       doctest::Contains("unknown argument '--checkpoint'"), zt::ConfigError);
}

TEST_CASE("ab takes arms and its flags, compare and ab-report their run folders anywhere") {
  auto a = parse_cli({"ab", "--config", "j.toml", "--a", "plugins.shard=shard_tensor", "--b",
                      "plugins.shard=shard_bucket", "--steps", "20", "--reps", "3", "--warmup", "0",
                      "--allow-different-math", "--out", "o", "--set", "zero.stage=2"});
  CHECK(a.command == Command::kAb);
  CHECK(a.ab.a == "plugins.shard=shard_tensor");
  CHECK(a.ab.b == "plugins.shard=shard_bucket");
  CHECK(a.ab.steps == 20);
  CHECK(a.ab.reps == 3);
  CHECK(a.ab.warmup == 0);
  CHECK(a.ab.allow_different_math);
  CHECK(parse_cli({"ab", "--config", "j.toml", "--a", "x.y=1", "--rtol", "1e-5"}).ab.rtol == 1e-5);
  CHECK(a.ab.out_dir == "o");
  CHECK(a.overrides == std::vector<std::string>{"zero.stage=2"});
  auto c = parse_cli({"compare", "--warmup", "1", "runA", "runB"});
  CHECK(c.command == Command::kCompare);
  CHECK(c.compare_runs == std::vector<std::string>{"runA", "runB"});
  CHECK(c.ab.out_dir == "runs/compare");
  auto r = parse_cli({"ab-report", "run"});
  CHECK(r.command == Command::kAbReport);
  CHECK(r.ab.warmup == 1);
  CHECK(r.ab.out_dir.empty());  // into the run folder
  CHECK(r.ab.arms.empty());     // the job's two
  CHECK(parse_cli({"ab-report", "run", "--arms", "A,C"}).ab.arms ==
        std::vector<std::string>{"A", "C"});
  for (const char* bad : {"A", "A,A", "A,", ",C", "A,B,C"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_cli({"ab-report", "run", "--arms", bad}),
                         doctest::Contains("expected two different arms of the job"),
                         zt::ConfigError);
  }
  // The arms of ab are --a and --b.
  CHECK_THROWS_AS(parse_cli({"ab", "--config", "j.toml", "--a", "x=1", "--arms", "A,C"}),
                  zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"ab", "--config", "j.toml"}), doctest::Contains("--a or --b"),
                       zt::ConfigError);
  // One arm is enough: the other runs the config as written.
  CHECK(parse_cli({"ab", "--config", "j", "--b", "x=1"}).ab.a.empty());
  // Given twice, the second replaced the first: refused, saying how to give both.
  CHECK_THROWS_WITH_AS(parse_cli({"ab", "--config", "j", "--a", "x=1", "--a", "y=2"}),
                       doctest::Contains("--a given twice; join one arm's overrides with commas: "
                                         "--a x=1,..."),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"ab", "--config", "j", "--a", "x=1", "--reps", "0"}),
                       doctest::Contains("--reps 0"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"compare", "one"}), doctest::Contains("two run folders"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"ab-report", "a", "b"}),
                       doctest::Contains("needs the run.out_dir of a live A/B job"),
                       zt::ConfigError);
  // ab-report checks no loss agreement: a tolerance for one is refused, not ignored.
  CHECK_THROWS_WITH_AS(parse_cli({"ab-report", "run", "--rtol", "1e-6"}),
                       doctest::Contains("--rtol: trainer ab-report reports a live A/B job's arms "
                                         "as they ran"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"ab-report", "run", "--allow-different-math"}),
                       doctest::Contains("--allow-different-math is trainer ab's and trainer "
                                         "compare's"),
                       zt::ConfigError);
  CHECK(parse_cli({"compare", "a", "b", "--rtol", "1e-3"}).ab.rtol == 1e-3);
}

TEST_CASE("bad command lines are config errors that say what to do") {
  CHECK_THROWS_WITH_AS(parse_cli({}), doctest::Contains("no config given"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"--config"}), doctest::Contains("--config needs a value"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"--config", "c", "--nproc", "0"}), doctest::Contains("--nproc 0"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"plugins", "describe"}), doctest::Contains("needs a plugin id"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"plugins", "remove"}),
                       doctest::Contains("unknown 'trainer plugins remove'"), zt::ConfigError);
  // Counts past what they hold are refused, not saturated or cut to another value.
  CHECK_THROWS_WITH_AS(parse_cli({"prepare-data", "in.txt", "--unit-kb", "99999999999999999999"}),
                       doctest::Contains("--unit-kb 99999999999999999999: expected a whole number"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"prepare-data", "in.txt", "--threads", "5000000000"}),
                       doctest::Contains("at most 4096"), zt::ConfigError);
  CHECK(parse_cli({"prepare-data", "in.txt", "--threads", "2", "--out", "o"}).prepare.threads == 2);
}

TEST_CASE("prepare-data: every flag reaches the request, each unlike its default") {
  const auto p = parse_cli({"prepare-data", "a.txt",       "--out",       "data/p",
                            "b.jsonl",      "--tokenizer", "cl100k_base", "--tokenizer-dir",
                            "tok",          "--field",     "body",        "--separator",
                            "%%",           "--exclude",   "*.md",        "--exclude",
                            "x*",           "--threads",   "3",           "--unit-kb",
                            "64",           "--overwrite"})
                     .prepare;
  CHECK(p.inputs == std::vector<std::string>{"a.txt", "b.jsonl"});  // flags between inputs
  CHECK(p.out_prefix == "data/p");
  CHECK(p.tokenizer == "cl100k_base");
  CHECK(p.tokenizer_dir == "tok");
  CHECK(p.field == "body");
  CHECK(p.separator == "%%");
  CHECK(p.exclude == std::vector<std::string>{"*.md", "x*"});
  CHECK(p.threads == 3);
  CHECK(p.unit_bytes == 64 * 1024);
  CHECK(p.overwrite);
  // Left out, each is the documented default.
  const auto d = parse_cli({"prepare-data", "a.txt", "--out", "p"}).prepare;
  CHECK(d.tokenizer == "gpt2");
  CHECK(d.field == "text");
  CHECK(d.separator.empty());
  CHECK(d.threads == 0);
  CHECK(d.unit_bytes == 8 << 20);
  CHECK_FALSE(d.overwrite);
}

TEST_CASE("report, trace merge and flight take one run folder, report and merge an --out") {
  auto r = parse_cli({"report", "runs/x", "--out", "r.html"});
  CHECK(r.command == Command::kReport);
  CHECK(r.compare_runs == std::vector<std::string>{"runs/x"});
  CHECK(r.out_path == "r.html");
  auto m = parse_cli({"trace", "merge", "runs/x"});
  CHECK(m.command == Command::kTraceMerge);
  CHECK(m.compare_runs == std::vector<std::string>{"runs/x"});
  CHECK(m.out_path.empty());
  CHECK(parse_cli({"flight", "runs/x"}).command == Command::kFlight);
  CHECK_THROWS_WITH_AS(parse_cli({"trace", "runs/x"}), doctest::Contains("'trainer trace' needs"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"report"}), doctest::Contains("needs one run folder"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"flight", "a", "b"}), doctest::Contains("needs one run folder"),
                       zt::ConfigError);
  CHECK_THROWS_WITH_AS(parse_cli({"flight", "a", "--out", "x"}),
                       doctest::Contains("unknown argument '--out'"), zt::ConfigError);
}

TEST_CASE("estimate and tune take a config and their flags, tune's budget a duration") {
  auto e = parse_cli({"estimate", "--config", "c.toml", "--nproc", "8", "--hosts", "2", "--json",
                      "--margin", "0.2"});
  CHECK(e.command == Command::kEstimate);
  CHECK(e.tune.hosts == 2);
  CHECK(e.tune.json);
  CHECK(e.tune.margin == doctest::Approx(0.2));
  auto t = parse_cli({"tune", "--config", "c.toml", "--budget", "15m", "--out", "d",
                      "--trial-steps", "8", "--candidate", "zero.stage=1,data.micro_batch=2",
                      "--rtol", "1e-5", "--set", "run.steps=50"});
  CHECK(t.command == Command::kTune);
  CHECK(t.tune.budget_s == doctest::Approx(900));
  CHECK(t.tune.out_dir == "d");
  CHECK(t.tune.trial_steps == 8);
  CHECK(t.tune.candidates == std::vector<std::string>{"zero.stage=1,data.micro_batch=2"});
  CHECK(t.tune.rtol == doctest::Approx(1e-5));
  CHECK(t.overrides == std::vector<std::string>{"run.steps=50"});
  CHECK(parse_cli({"tune", "--config", "c", "--budget", "90s"}).tune.budget_s ==
        doctest::Approx(90));
  CHECK(parse_cli({"tune", "--config", "c", "--budget", "1h"}).tune.budget_s ==
        doctest::Approx(3600));
  CHECK(parse_cli({"tune", "--config", "c", "--budget", "120"}).tune.budget_s ==
        doctest::Approx(120));
  for (const char* bad : {"15x", "-3m", "m", ""}) {
    CHECK_THROWS_AS(parse_cli({"tune", "--config", "c", "--budget", bad}), zt::ConfigError);
  }
  CHECK_THROWS_AS(parse_cli({"tune", "--budget", "5m"}), zt::ConfigError);  // no config
  CHECK_THROWS_AS(parse_cli({"estimate", "--config", "c", "--budget", "5m"}), zt::ConfigError);
  CHECK_THROWS_AS(parse_cli({"tune", "--config", "c", "--json"}), zt::ConfigError);
  CHECK_THROWS_AS(parse_cli({"estimate", "--config", "c", "--margin", "1.5"}), zt::ConfigError);
  // Past int: once 0 hosts (a division by zero in the estimate), or -1.
  CHECK_THROWS_WITH_AS(parse_cli({"estimate", "--config", "c", "--hosts", "4294967296"}),
                       "--hosts 4294967296: expected a number of hosts from 1 to 1024",
                       zt::ConfigError);
  CHECK_THROWS_AS(parse_cli({"estimate", "--config", "c", "--hosts", "4294967295"}),
                  zt::ConfigError);
  CHECK(parse_cli({"estimate", "--config", "c", "--hosts", "1024"}).tune.hosts == 1024);
}

TEST_CASE("tune --launcher: its words, the command found on PATH, a missing one named") {
  const auto t = parse_cli({"tune", "--config", "c", "--hosts", "2", "--launcher", "sh -c  x"});
  REQUIRE(t.tune.launcher.size() == 3);
  // execv does not search PATH, so the command is resolved to a path that runs.
  CHECK(t.tune.launcher[0].find('/') != std::string::npos);
  CHECK(t.tune.launcher[0].size() >= 3);
  CHECK(t.tune.launcher[0].substr(t.tune.launcher[0].size() - 3) == "/sh");
  CHECK(::access(t.tune.launcher[0].c_str(), X_OK) == 0);
  CHECK(t.tune.launcher[1] == "-c");
  CHECK(t.tune.launcher[2] == "x");
  CHECK(parse_cli({"tune", "--config", "c", "--launcher", "/bin/sh"}).tune.launcher ==
        std::vector<std::string>{"/bin/sh"});
  for (const char* bad : {"zt-no-such-launcher --x", "/nonexistent/srun", "   "}) {
    CAPTURE(bad);
    try {
      parse_cli({"tune", "--config", "c", "--launcher", bad});
      FAIL("--launcher " << bad << " was taken");
    } catch (const zt::ConfigError& e) {
      CHECK(std::string(e.what()).find("--launcher") != std::string::npos);
    }
  }
  // estimate sizes a job without starting one: it takes no launcher.
  CHECK_THROWS_AS(parse_cli({"estimate", "--config", "c", "--launcher", "sh"}), zt::ConfigError);
}

TEST_CASE("--help: the overview without a command, the command's own help with one") {
  const auto plain = parse_cli({"--help"});
  CHECK(plain.help);
  CHECK_FALSE(plain.subcommand);
  // A command's help needs none of the flags the command needs to run.
  for (const auto& [args, command] : std::vector<std::pair<std::vector<std::string>, Command>>{
           {{"ab", "--help"}, Command::kAb},
           {{"tune", "-h"}, Command::kTune},
           {{"estimate", "--help"}, Command::kEstimate},
           {{"sample", "--help"}, Command::kSample},
           {{"plugins", "--help"}, Command::kPluginsList},
           {{"plugins", "describe", "--help"}, Command::kPluginsDescribe},
           {{"trace", "--help"}, Command::kTraceMerge},
           {{"compare", "--help"}, Command::kCompare}}) {
    CAPTURE(args[0]);
    const auto a = parse_cli(args);
    CHECK(a.help);
    CHECK(a.subcommand);
    CHECK(a.command == command);
  }
}

TEST_CASE("trainer help CMD and trainer --help CMD are CMD --help; help alone is the overview") {
  for (const auto& args : std::vector<std::vector<std::string>>{{"help"}, {"-h"}}) {
    const auto a = parse_cli(args);
    CHECK(a.help);
    CHECK_FALSE(a.subcommand);
  }
  for (const auto& [args, command] : std::vector<std::pair<std::vector<std::string>, Command>>{
           {{"help", "export"}, Command::kExport},
           {{"--help", "tune"}, Command::kTune},
           {{"-h", "prepare-data"}, Command::kPrepareData},
           {{"help", "plugins", "describe"}, Command::kPluginsDescribe},
           {{"help", "trace", "merge"}, Command::kTraceMerge},
           {{"help", "ab-report"}, Command::kAbReport}}) {
    CAPTURE(args[1]);
    const auto a = parse_cli(args);
    CHECK(a.help);
    CHECK(a.subcommand);
    CHECK(a.command == command);
  }
  // Training's help stays `--help` with the job's flags, and `help` with them is the same.
  for (const char* word : {"--help", "help"}) {
    const auto training = parse_cli({word, "--config", "job.toml"});
    CHECK(training.help);
    CHECK_FALSE(training.subcommand);
    CHECK(training.config_path == "job.toml");
  }
  // A word that is no command is named, with where the commands are listed.
  CHECK_THROWS_WITH_AS(
      parse_cli({"help", "trian"}),
      doctest::Contains("trainer help trian: no such command; trainer --help lists"),
      zt::ConfigError);
}

TEST_CASE("help texts: the overview fits 25 lines and names every command, and each command's "
          "help gives its usage and an example") {
  const std::string overview = zt::trainer::overview();
  CHECK(std::count(overview.begin(), overview.end(), '\n') <= 25);
  const std::vector<std::pair<Command, std::string>> commands = {
      {Command::kRun, "trainer --config FILE"},
      {Command::kEval, "trainer eval"},
      {Command::kSample, "trainer sample"},
      {Command::kExport, "trainer export"},
      {Command::kAb, "trainer ab "},
      {Command::kCompare, "trainer compare"},
      {Command::kAbReport, "trainer ab-report"},
      {Command::kEstimate, "trainer estimate"},
      {Command::kTune, "trainer tune"},
      {Command::kReport, "trainer report"},
      {Command::kTraceMerge, "trainer trace merge"},
      {Command::kFlight, "trainer flight"},
      {Command::kPluginsList, "trainer plugins list"}};
  for (const auto& [command, usage] : commands) {
    const std::string help = zt::trainer::command_help(command);
    CAPTURE(usage);
    CHECK(help.rfind("usage: " + usage, 0) == 0);
    CHECK(help.find("\nExample:\n  " + usage.substr(0, usage.find(' ', 8))) != std::string::npos);
    CHECK(help != overview);
    if (command != Command::kRun) {
      const std::string word = usage.substr(8, usage.find(' ', 8) - 8);
      CHECK(overview.find("  " + word + " ") != std::string::npos);
    }
  }
}

TEST_CASE("the job's flags are refused by a command that does not use them, not dropped") {
  // Each was parsed for every command and dropped by those that read no job.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"report", "runs/x", "--nproc", "4"}, "trainer report does not take --nproc"},
      {{"report", "runs/x", "--set", "run.name=y"}, "trainer report does not take --set"},
      {{"prepare-data", "in.txt", "--out", "p", "--config", "c.toml"},
       "trainer prepare-data does not take --config"},
      {{"flight", "runs/x", "--resume", "auto"}, "trainer flight does not take --resume"},
      {{"export", "--checkpoint", "c", "--out", "o", "--nproc", "4"},
       "trainer export does not take --nproc"},
      {{"eval", "--checkpoint", "c", "--max-restarts", "3"},
       "trainer eval does not take --max-restarts"},
      {{"ab", "--config", "j", "--b", "x=1", "--resume", "auto"},
       "trainer ab does not take --resume"},
      {{"compare", "a", "b", "--deepspeed", "ds.json"},
       "trainer compare does not take --deepspeed"},
      {{"plugins", "list", "--nproc", "2"}, "trainer plugins list does not take --nproc"},
      // ab, tune and estimate ran their jobs: --print-config is training's, eval's and sample's.
      {{"tune", "--config", "j", "--print-config"},
       "trainer tune does not take --print-config (trainer --config FILE --print-config prints "
       "a job's config)"},
      {{"ab", "--config", "j", "--b", "x=1", "--print-config"}, "trainer ab does not take"},
      {{"estimate", "--config", "j", "--print-config"}, "trainer estimate does not take"},
      // export reads launch.timeout_s alone.
      {{"export", "--checkpoint", "c", "--out", "o", "--set", "zero.stage=2"},
       "trainer export takes only --set launch.timeout_s=S (the bound on each checkpoint read): "
       "--set zero.stage=2 has nothing to set"},
      {{"plugins", "list", "--set", "run.name=x"},
       "trainer plugins list takes only --set plugins.dirs=[...] (where to look for plugins): "
       "--set "
       "run.name=x has nothing to set"},
  };
  for (const auto& [args, message] : refused) {
    CAPTURE(message);
    CHECK_THROWS_WITH_AS(parse_cli(args), doctest::Contains(message.c_str()), zt::ConfigError);
    // With --help as well: a command line checked by its --help is checked whole.
    std::vector<std::string> asking = args;
    asking.push_back("--help");
    CHECK_THROWS_WITH_AS(parse_cli(asking), doctest::Contains(message.c_str()), zt::ConfigError);
  }
  // Those that use them still take them.
  CHECK(parse_cli({"eval", "--checkpoint", "c", "--nproc", "2", "--print-config"}).print_config);
  CHECK(parse_cli({"sample", "--checkpoint", "c", "--config", "j", "--set", "x=1"}).overrides ==
        std::vector<std::string>{"x=1"});
  CHECK(parse_cli({"plugins", "list", "--config", "j", "--plugin-dir", "d", "--set",
                   "plugins.dirs=[\"e\"]"})
            .plugin_dirs == std::vector<std::string>{"d"});
  // ab's arms and tune's trials restart their ranks as training does.
  CHECK(parse_cli({"ab", "--config", "j", "--b", "x=1", "--max-restarts", "2"}).overrides.size() ==
        1);
  CHECK(parse_cli({"tune", "--config", "j", "--nproc", "4", "--deepspeed", "ds.json"}).nproc == 4);
  CHECK(parse_cli({"export", "--checkpoint", "c", "--out", "o", "--set", "launch.timeout_s=600"})
            .overrides == std::vector<std::string>{"launch.timeout_s=600"});
  CHECK(parse_cli({"--config", "j", "--resume", "auto", "--max-restarts", "2"}).overrides.size() ==
        2);
}

TEST_CASE("sample: --prompt and --tokens together are refused, --samples is bounded") {
  CHECK_THROWS_WITH_AS(
      parse_cli({"sample", "--checkpoint", "c", "--prompt", "Hello", "--tokens", "1,2"}),
      doctest::Contains("give --prompt TEXT or --tokens ID,ID,..., not both"), zt::ConfigError);
  CHECK_THROWS_WITH_AS(
      parse_cli({"sample", "--checkpoint", "c", "--tokens", "1,2", "--prompt", "Hello"}),
      doctest::Contains("not both"), zt::ConfigError);
  CHECK(parse_cli({"sample", "--checkpoint", "c", "--prompt", "Hi"}).sample.prompt == "Hi");
  CHECK_THROWS_WITH_AS(
      parse_cli({"sample", "--checkpoint", "c", "--samples", "9223372036854775807"}),
      doctest::Contains("--samples 9223372036854775807: expected a whole number of at least 1 "
                        "and at most 65536"),
      zt::ConfigError);
  CHECK(parse_cli({"sample", "--checkpoint", "c", "--samples", "65536"}).sample.samples == 65536);
}
