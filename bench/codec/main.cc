// zt_bench_codec: ZeRO++ codecs (docs/codecs.md, "Benchmarks" in docs/architecture.md), three
// parts:
//   kernels  codec_blockq's encode and decode on one core: fp32 input bytes per second against
//            memcpy of the same bytes, side by side in this process.
// and on the bench GPT (~10.8M parameters, fp32, stage 3):
//   loss  2 ranks on this host, --loss-steps steps per arm: exact, int8 weights, int4 gradients,
//         int4 gradients with error feedback, int8 weights + int4 gradients with error feedback;
//         every 50 steps each arm's validation loss (the same held-out windows for every arm)
//         and the mean training loss of the 50 steps ending there (the same batches for every
//         arm), and their gaps to the exact run's, from rank 0's metrics.jsonl. The corpus is
//         --loss-data (default Debian's fortunes, 2.6 MB: 300 steps see an eighth of it, so the
//         loss measures learning, not a small file learnt by heart); its last 5% is held out.
//         The second arm is exact too, but sums each step's gradients in another order (two
//         micro batches of 2 instead of one of 4), which moves only the last bits of each step:
//         its gap is the run-to-run spread the others' must be read against. Two more arms
//         keep Adam's moments in bf16 (16-bit optimizer states: to nearest, and stochastic
//         rounding), two more the master weights (in a host tier: with fp32 compute a bf16
//         master cannot be the parameters; the tier alone changes no bit); --loss-arms picks
//         codecs, states, masters or all.
//   link  4 ranks on this host (shared memory), exact against the codecs limited to the
//         collectives across hosts (none here: what the setting costs where it codes nothing)
//         and against the codecs everywhere, each arm twice, interleaved; then 4 ranks in two
//         simulated hosts (network namespaces, needs root) per link rate (`tc`): flat stage 3
//         exact and with int8 weights + int4 gradients + error feedback (qwZ + qgZ), and MiCS
//         groups of one host (hpZ: the weights gathered inside the host) exact and with int4
//         gradients + error feedback on the all-reduce across the hosts (hpZ + qgZ). Median step
//         time, tokens/s against the flat exact run on the same link, bytes between the hosts
//         per step (the veth's counters), and the encoded bytes of the gathers and
//         reduce-scatters against the exact run's (the trainer's collective counters).
// Prints markdown tables, writes bench-results/codec.json; exits non-zero when a job failed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bench_util.h"
#include "common/child_process.h"
#include "common/shell.h"
#include "common/two_hosts.h"
#include "zt/codec.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_codec [--part kernels|loss|link|all] [--loss-steps N] [--steps N]\n"
    "                      [--warmup W] [--loss-arms codecs|states|masters|all]\n"
    "                      [--loss-data PATH]\n"
    "                      [--rates R1,R2] [--json PATH] [--trainer P]\n"
    "  Trains the bench GPT at stage 3 with and without ZeRO++ codecs (codec_blockq).\n"
    "  --part        kernels (encode/decode against memcpy), loss (one host), link (4 ranks\n"
    "                on one host, then in two simulated hosts, needs root) or all (default)\n"
    "  --loss-steps  steps per arm of the loss part (default 300)\n"
    "  --loss-arms   the loss part's arms besides exact: codecs, states (Adam's moments in bf16),\n"
    "                masters (the master weights in bf16) or all (default)\n"
    "  --loss-data   the loss part's text: a file, or a folder whose files are joined in name\n"
    "                order (*.dat and links left out); default /usr/share/games/fortunes\n"
    "  --steps       steps per job of the link part (default 6)\n"
    "  --warmup      steps left out of the link part's step time (default 2)\n"
    "  --rates       link rates, `tc` syntax, \"none\" = unshaped (default none,1gbit,200mbit)\n"
    "  --json        results file (default bench-results/codec.json)\n"
    "  --trainer     trainer executable (default: the one built with the bench)\n";

struct Options {
  std::string part = "all";
  int loss_steps = 300, steps = 6, warmup = 2;
  std::string loss_arms = "all";
  std::string loss_data = "/usr/share/games/fortunes";
  std::vector<std::string> rates = {"none", "1gbit", "200mbit"};
  std::string json = "bench-results/codec.json";
  std::string trainer = ZT_BENCH_TRAINER;
};

struct Arm {
  const char* name;
  std::vector<std::string> sets;  // --set overrides
};

const std::vector<std::string> kWeights8 = {"plugins.codec_weights=codec_blockq",
                                            "codec.weights.bits=8"};
const std::vector<std::string> kGrads4 = {"plugins.codec_gradients=codec_blockq",
                                          "codec.gradients.bits=4"};

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Arm> loss_arms(const std::string& which) {
  // With 2 ranks, averaging in halves (zero.gradient_predivide_factor = 2) divides by powers of
  // two and rounds nothing; two micro batches of 2 sum the same samples in another order.
  std::vector<Arm> arms{{"exact", {}},
                        {"exact, rounded otherwise", {"data.micro_batch=2", "data.grad_accum=2"}}};
  if (which == "all" || which == "codecs") {
    arms.push_back({"int8 weights", kWeights8});
    arms.push_back({"int4 gradients", kGrads4});
    arms.push_back(
        {"int4 gradients + error feedback", joined(kGrads4, {"zero.codec_error_feedback=true"})});
    arms.push_back({"int8 weights + int4 gradients + error feedback",
                    joined(joined(kWeights8, kGrads4), {"zero.codec_error_feedback=true"})});
  }
  if (which == "all" || which == "states") {
    // Stochastic rounding is the plugin's default for bf16 moments; to nearest is the arm that
    // shows why (exp_avg_sq's per-step decay is under half a bf16 spacing).
    arms.push_back({"bf16 moments, to nearest",
                    {"plugin.optim_hybrid_adam.state_dtype=bf16",
                     "plugin.optim_hybrid_adam.state_rounding=nearest"}});
    arms.push_back({"bf16 moments, stochastic rounding (default)",
                    {"plugin.optim_hybrid_adam.state_dtype=bf16"}});
  }
  if (which == "all" || which == "masters") {
    const std::vector<std::string> masters{"plugins.offload_optimizer=offload_cpu",
                                           "plugin.optim_hybrid_adam.master_dtype=bf16"};
    arms.push_back({"bf16 masters, stochastic rounding", masters});
    arms.push_back({"bf16 masters, to nearest",
                    joined(masters, {"plugin.optim_hybrid_adam.master_rounding=nearest"})});
  }
  return arms;
}

const std::vector<std::string> kBothCodecs = joined(joined(kWeights8, kGrads4),
                                                    {"zero.codec_error_feedback=true"});

// Two simulated hosts. The first arm is the one the others' tokens/s are against.
std::vector<Arm> link_arms() {
  // MiCS groups of one host's 2 ranks: the weight gathers stay inside the host, so only the
  // gradients' all-reduce across the groups crosses the link (ZeRO++'s hpZ layout).
  const std::vector<std::string> hpz = {"zero.mics_shard_size=2"};
  return {{"exact", {}},
          {"int8 weights + int4 gradients + error feedback", kBothCodecs},
          {"hpZ, exact", hpz},
          {"hpZ + int4 gradients + error feedback across hosts",
           joined(joined(hpz, kGrads4),
                  {"zero.codec_error_feedback=true", "zero.codec_scope=across_hosts"})}};
}

// One host: the codecs limited to the collectives across hosts code nothing here.
std::vector<Arm> one_host_arms() {
  return {{"exact", {}},
          {"codecs across hosts only", joined(kBothCodecs, {"zero.codec_scope=across_hosts"})},
          {"codecs everywhere", kBothCodecs}};
}

Options parse(const std::vector<std::string>& args) {
  Options o;
  const std::vector<std::string> known = {"--part",    "--loss-steps", "--steps",
                                          "--warmup",  "--rates",      "--json",
                                          "--trainer", "--loss-arms",  "--loss-data"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, known, kUsage, flag, value)) {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (flag == "--part") o.part = value;
    if (flag == "--loss-steps")
      o.loss_steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--steps") o.steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--warmup") o.warmup = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--rates") o.rates = split_list(value);
    if (flag == "--json") o.json = value;
    if (flag == "--trainer") o.trainer = value;
    if (flag == "--loss-arms") o.loss_arms = value;
    if (flag == "--loss-data") o.loss_data = value;
  }
  if (o.loss_arms != "codecs" && o.loss_arms != "states" && o.loss_arms != "masters" &&
      o.loss_arms != "all")
    throw ConfigError("--loss-arms must be codecs, states, masters or all\n" + std::string(kUsage));
  if (o.part != "kernels" && o.part != "loss" && o.part != "link" && o.part != "all")
    throw ConfigError("--part must be kernels, loss, link or all\n" + std::string(kUsage));
  if (o.warmup >= o.steps)
    throw ConfigError("--warmup must be below --steps\n" + std::string(kUsage));
  return o;
}

// Rank 0's metrics.jsonl: each step's loss and time, and the validation loss after a step.
struct Curve {
  std::vector<double> loss, step_s;
  std::map<int, double> val_loss;
};

Curve read_curve(const std::string& metrics) {
  std::ifstream in(metrics);
  Curve c;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.value("event", "") == "eval" && j.contains("val_loss") && j.contains("step")) {
      c.val_loss[j["step"].get<int>()] = j["val_loss"].get<double>();
      continue;
    }
    if (!j.contains("step_time_s") || !j.contains("loss")) continue;
    c.loss.push_back(j["loss"].get<double>());
    c.step_s.push_back(j["step_time_s"].get<double>());
  }
  if (c.loss.empty()) throw IoError("zt_bench_codec: no step in " + metrics);
  return c;
}

// The mean training loss of the 50 steps ending at `step` (1-based). One step's loss is one
// batch's; every arm draws the same batches, so the windows of two arms compare like with like.
double window_loss(const Curve& c, int step) {
  double sum = 0;
  int n = 0;
  for (int s = std::max(1, step - 49); s <= step && s <= static_cast<int>(c.loss.size()); ++s) {
    sum += c.loss[s - 1];
    ++n;
  }
  return n ? sum / n : NAN;
}

double val_loss(const Curve& c, int step) {
  auto it = c.val_loss.find(step);
  return it == c.val_loss.end() ? NAN : it->second;
}

// "all_gather 451 (286.7 MiB) ... all_to_all 240 (71.4 MiB)" of a rank's log: op -> MiB.
std::map<std::string, double> collective_mib(const std::string& log) {
  std::ifstream in(log);
  std::map<std::string, double> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("collectives:", 0) != 0) continue;
    // "op calls (X MiB)": four words an op.
    std::istringstream words(line.substr(12));
    std::string op, calls, mib, unit;
    while (words >> op >> calls >> mib >> unit) out[op] = std::atof(mib.c_str() + 1);
  }
  return out;
}

// Encode and decode of codec_blockq on this thread against memcpy, GB/s of fp32 input.
struct KernelRate {
  std::string codec;
  double encode_gbs = 0, decode_gbs = 0, memcpy_gbs = 0;
};

// Seconds per call of `fn`, the median of 7 timed runs after a warm-up.
double seconds_per_call(const std::function<void()>& fn) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < 7; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(times);
}

std::vector<KernelRate> run_kernels() {
  constexpr int64_t kElements = int64_t{1} << 24;  // 64 MiB of fp32: past every cache
  std::vector<float> in(kElements), out(kElements), copy(kElements);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  for (float& v : in) v = normal(gen);
  const double gb = 4.0 * kElements / 1e9;
  const double memcpy_s = seconds_per_call(
      [&] { std::memcpy(copy.data(), in.data(), in.size() * sizeof(float)); });
  PluginCatalog catalog;
  const CodecPlugin& plugin = catalog.codec("codec_blockq", "zt_bench_codec");
  std::vector<KernelRate> rates;
  for (int64_t bits : {8, 4}) {
    std::map<std::string, Value> values{{"bits", bits}, {"block", int64_t{256}}};
    const auto codec = plugin.create(zt::Options("codec.gradients", plugin.options(), values, {}));
    std::vector<uint8_t> bytes(static_cast<size_t>(codec->encoded_bytes(kElements)));
    KernelRate r;
    r.codec = "int" + std::to_string(bits) + ", blocks of 256";
    r.encode_gbs = gb /
                   seconds_per_call([&] { codec->encode(in.data(), kElements, bytes.data()); });
    r.decode_gbs = gb /
                   seconds_per_call([&] { codec->decode(bytes.data(), kElements, out.data()); });
    r.memcpy_gbs = gb / memcpy_s;
    rates.push_back(r);
    std::printf("  %s: encode %.2f GB/s, decode %.2f GB/s, memcpy %.2f GB/s\n", r.codec.c_str(),
                r.encode_gbs, r.decode_gbs, r.memcpy_gbs);
  }
  return rates;
}

void print_kernels(const std::vector<KernelRate>& rates) {
  std::printf("\ncodec_blockq on one core, GB/s of fp32 input (64 MiB runs):\n\n| codec | encode | "
              "decode | memcpy | encode/memcpy | decode/memcpy |\n| --- | ---: | ---: | ---: | "
              "---: | ---: |\n");
  for (const KernelRate& r : rates) {
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.codec.c_str(), r.encode_gbs,
                r.decode_gbs, r.memcpy_gbs, r.encode_gbs / r.memcpy_gbs,
                r.decode_gbs / r.memcpy_gbs);
  }
}

struct LossRun {
  std::string arm;
  Curve curve;
};

// --loss-data as one text file: a folder's regular files joined in name order into `dir`, leaving
// out fortune's *.dat indexes (binary) and links (fortune's *.u8 point at the files beside them).
std::string loss_corpus(const std::string& data, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(data, ec)) {
    if (fs::is_regular_file(data, ec)) return data;
    throw ConfigError("zt_bench_codec: --loss-data " + data +
                      " is neither a file nor a folder: give a text file (scripts/setup.sh "
                      "installs the default, Debian's fortunes)");
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(data)) {
    if (e.is_symlink() || !e.is_regular_file() || e.path().extension() == ".dat") continue;
    files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  const std::string joined_path = dir + "/loss-corpus.txt";
  std::ofstream out(joined_path, std::ios::binary);
  for (const fs::path& f : files) out << std::ifstream(f, std::ios::binary).rdbuf();
  out.close();
  if (!out || fs::file_size(joined_path) < 1 << 20) {
    throw ConfigError("zt_bench_codec: --loss-data " + data + " gave " +
                      std::to_string(fs::file_size(joined_path, ec)) +
                      " bytes of text; the loss part needs at least 1 MiB, so that its steps do "
                      "not learn the text by heart");
  }
  return joined_path;
}

// Runs a trainer job with its output in `out`.log; throws, naming `what` and the log's tail,
// when it fails.
void run_job(const std::vector<std::string>& argv, const std::string& out,
             const std::string& what) {
  const int rc = run_logged(argv, out + ".log");
  if (rc != 0) {
    throw CommError("zt_bench_codec: " + what + " failed (exit " + std::to_string(rc) + "):\n" +
                    tail_lines(out + ".log", 15));
  }
}

std::vector<LossRun> run_loss(const Options& o, const std::string& dir) {
  const std::string corpus = loss_corpus(o.loss_data, dir);
  // 64 micro batches of 4 held-out windows (32,768 tokens), the same for every arm, whatever
  // its training micro batch.
  const std::vector<std::string> loss_sets = {
      "launch.nproc=2",      "run.log_every=50", "data.path=" + corpus, "data.val_fraction=0.05",
      "eval.every_steps=50", "eval.batches=64",  "eval.micro_batch=4"};
  std::vector<LossRun> runs;
  for (const Arm& arm : loss_arms(o.loss_arms)) {
    const std::string out = dir + "/loss" + std::to_string(runs.size());
    run_job(bench_gpt_command(o.trainer, ZT_BENCH_SOURCE_DIR, out, o.loss_steps,
                              joined(loss_sets, arm.sets)),
            out, "the " + std::string(arm.name) + " run");
    runs.push_back({arm.name, read_curve(out + "/metrics.jsonl")});
    std::printf("  loss, %s: validation %.4f, training %.4f after %d steps\n", arm.name,
                val_loss(runs.back().curve, o.loss_steps),
                window_loss(runs.back().curve, o.loss_steps), o.loss_steps);
    std::fflush(stdout);
  }
  return runs;
}

void print_loss_table(const Options& o, const std::vector<LossRun>& runs, const char* title,
                      double (*loss_at)(const Curve&, int)) {
  std::printf("\n%s, 2 ranks, one host:\n\n| step |", title);
  for (const auto& r : runs) std::printf(" %s |", r.arm.c_str());
  std::printf("\n| ---: |");
  for (size_t i = 0; i < runs.size(); ++i) std::printf(" ---: |");
  std::printf("\n");
  for (int s = 50; s <= o.loss_steps; s += 50) {
    const double exact = loss_at(runs[0].curve, s);
    std::printf("| %d | %.4f |", s, exact);
    for (size_t i = 1; i < runs.size(); ++i) {
      const double l = loss_at(runs[i].curve, s);
      std::printf(" %.4f (%+.2f%%) |", l, 100 * (l - exact) / exact);
    }
    std::printf("\n");
  }
}

void print_loss(const Options& o, const std::vector<LossRun>& runs) {
  print_loss_table(o, runs, "validation loss (the held-out 5%'s windows, after the step)",
                   val_loss);
  print_loss_table(o, runs, "training loss (mean of the 50 steps ending at the step)", window_loss);
}

struct LinkJob {
  std::string rate, arm;  // rate: a `tc` rate, "none", or kOneHost
  double step_s = 0, bytes_per_step = NAN;
  std::map<std::string, double> mib;  // rank 0's collectives, MiB over the run
};

const char* kOneHost = "one host";

// The steps after the warm-up of a job's rank 0.
std::vector<double> timed_steps(const Options& o, const std::string& out) {
  const Curve c = read_curve(out + "/metrics.jsonl");
  if (static_cast<int>(c.step_s.size()) <= o.warmup)
    throw IoError("zt_bench_codec: " + out + "/metrics.jsonl has no step after the warm-up");
  return std::vector<double>(c.step_s.begin() + o.warmup, c.step_s.end());
}

// 4 ranks started by the trainer's own launcher on this host, each arm twice and interleaved, so
// that the machine's drift over the part falls on every arm alike; the step time is the median
// of both runs' timed steps.
std::vector<LinkJob> run_one_host(const Options& o, const std::string& dir) {
  const std::vector<Arm> arms = one_host_arms();
  std::vector<std::vector<double>> steps(arms.size());
  std::vector<LinkJob> jobs(arms.size());
  for (int round = 0; round < 2; ++round) {
    for (size_t a = 0; a < arms.size(); ++a) {
      const std::string out = dir + "/host" + std::to_string(round) + "-" + std::to_string(a);
      run_job(bench_gpt_command(o.trainer, ZT_BENCH_SOURCE_DIR, out, o.steps,
                                joined({"launch.nproc=4"}, arms[a].sets)),
              out, "the " + std::string(arms[a].name) + " job on one host");
      const std::vector<double> timed = timed_steps(o, out);
      steps[a].insert(steps[a].end(), timed.begin(), timed.end());
      jobs[a].rate = kOneHost;
      jobs[a].arm = arms[a].name;
      jobs[a].mib = collective_mib(out + ".log");
    }
  }
  for (size_t a = 0; a < arms.size(); ++a) {
    jobs[a].step_s = median(steps[a]);
    std::printf("  one host, %s: %.3f s/step\n", jobs[a].arm.c_str(), jobs[a].step_s);
  }
  std::fflush(stdout);
  return jobs;
}

std::string hosts_script() { return two_hosts_script(ZT_BENCH_SOURCE_DIR); }
ShellResult hosts(const std::string& args) { return two_hosts(ZT_BENCH_SOURCE_DIR, args); }
double link_bytes(const std::string& name) {
  return zt::bench::link_bytes(ZT_BENCH_SOURCE_DIR, name, "zt_bench_codec");
}

LinkJob run_link_job(const Options& o, const std::string& name, const std::string& rate,
                     const Arm& arm, const std::string& out) {
  const std::string logs = out + "-logs";
  run_shell("mkdir -p " + shell_quote(logs));
  std::string command = hosts_script() + " run " + name + " 2 " + shell_quote(logs) + " " +
                        shell_quote(o.trainer) + " --config " +
                        shell_quote(std::string(ZT_BENCH_SOURCE_DIR) + "/configs/zero3.toml");
  std::vector<std::string> sets = joined(bench_gpt_overrides(), arm.sets);
  sets.push_back("run.steps=" + std::to_string(o.steps));
  sets.push_back("run.out_dir=" + out);
  sets.push_back("run.report=false");
  sets.push_back(std::string("data.path=") + ZT_BENCH_SOURCE_DIR + "/README.md");
  for (const std::string& kv : sets) command += " --set " + shell_quote(kv);
  const double before = link_bytes(name);
  const ShellResult r = run_shell(command);
  if (r.exit_code != 0)
    throw CommError("zt_bench_codec: the " + std::string(arm.name) + " job on link " + rate +
                    " failed:\n" + r.output);
  LinkJob job;
  job.rate = rate;
  job.arm = arm.name;
  job.bytes_per_step = (link_bytes(name) - before) / o.steps;
  job.step_s = median(timed_steps(o, out));
  job.mib = collective_mib(logs + "/rank0.log");
  return job;
}

std::vector<LinkJob> run_link(const Options& o, const std::string& dir) {
  const ShellResult can = hosts("check");
  if (can.exit_code != 0) throw ConfigError("zt_bench_codec: " + can.output);
  const std::string name = "ztc" + std::to_string(getpid() % 100000);
  std::vector<LinkJob> jobs = run_one_host(o, dir);
  for (const std::string& rate : o.rates) {
    const SimulatedHosts up(ZT_BENCH_SOURCE_DIR, name, rate, "zt_bench_codec");
    for (const Arm& arm : link_arms()) {
      jobs.push_back(run_link_job(o, name, rate, arm, dir + "/link" + std::to_string(jobs.size())));
      std::printf("  link %s, %s: %.3f s/step, %.1f MB/step between hosts\n", rate.c_str(),
                  arm.name, jobs.back().step_s, jobs.back().bytes_per_step / 1e6);
      std::fflush(stdout);
    }
  }
  return jobs;
}

// One row per job; tokens/s against the first job on the same link (its exact arm).
void print_link(const std::vector<LinkJob>& jobs) {
  std::printf("\n4 ranks, the bench GPT at stage 3; on one host, and in 2 simulated hosts of 2 "
              "ranks per link rate:\n\n| link | arm | s/step | tokens/s against exact | "
              "MB/step between hosts | against exact |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
  const LinkJob* exact = nullptr;
  for (const LinkJob& j : jobs) {
    if (!exact || exact->rate != j.rate) exact = &j;
    const std::string link = j.rate == "none"     ? "unshaped veth"
                             : j.rate == kOneHost ? kOneHost
                                                  : "`tc` " + j.rate;
    if (std::isnan(j.bytes_per_step)) {
      std::printf("| %s | %s | %.3f | %.3f | - | - |\n", link.c_str(), j.arm.c_str(), j.step_s,
                  exact->step_s / j.step_s);
    } else {
      std::printf("| %s | %s | %.3f | %.2f | %.1f | %.3f |\n", link.c_str(), j.arm.c_str(),
                  j.step_s, exact->step_s / j.step_s, j.bytes_per_step / 1e6,
                  j.bytes_per_step / exact->bytes_per_step);
    }
  }
  // Rank 0's collectives of the flat exact and coded arms on the first link between hosts.
  auto first = std::find_if(jobs.begin(), jobs.end(),
                            [](const LinkJob& j) { return j.rate != kOneHost; });
  if (jobs.end() - first < 2) return;
  const LinkJob &e = first[0], &c = first[1];
  auto mib = [](const LinkJob& j, const char* op) { return j.mib.count(op) ? j.mib.at(op) : 0; };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : NAN; };
  std::printf("\nrank 0's collective bytes, coded/exact: all_gather %.3f; gradients "
              "(all_to_all coded / reduce_scatter exact) %.3f\n",
              ratio(mib(c, "all_gather"), mib(e, "all_gather")),
              ratio(mib(c, "all_to_all"), mib(e, "reduce_scatter")));
}

void write_json(const Options& o, const std::vector<KernelRate>& kernels,
                const std::vector<LossRun>& losses, const std::vector<LinkJob>& jobs) {
  ResultsFile out(o.json);
  out << "{\"bench\":\"codec\",\"loss_steps\":" << o.loss_steps
      << ",\"loss_data\":" << json_string(o.loss_data) << ",\"steps\":" << o.steps
      << ",\"warmup\":" << o.warmup << "," << blas_json() << ",\"kernels\":[";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelRate& k = kernels[i];
    out << (i ? "," : "") << "{\"codec\":" << json_string(k.codec)
        << ",\"encode_gbs\":" << json_number(k.encode_gbs)
        << ",\"decode_gbs\":" << json_number(k.decode_gbs)
        << ",\"memcpy_gbs\":" << json_number(k.memcpy_gbs) << "}";
  }
  out << "],\"loss\":[";
  for (size_t i = 0; i < losses.size(); ++i) {
    out << (i ? "," : "") << "{\"arm\":" << json_string(losses[i].arm) << ",\"every_50\":[";
    for (int s = 50; s <= o.loss_steps; s += 50)
      out << (s > 50 ? "," : "") << json_number(window_loss(losses[i].curve, s));
    out << "],\"val_every_50\":[";
    for (int s = 50; s <= o.loss_steps; s += 50)
      out << (s > 50 ? "," : "") << json_number(val_loss(losses[i].curve, s));
    out << "]}";
  }
  out << "],\"link\":[";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const LinkJob& j = jobs[i];
    out << (i ? "," : "") << "{\"link\":" << json_string(j.rate)
        << ",\"arm\":" << json_string(j.arm) << ",\"step_s\":" << json_number(j.step_s)
        << ",\"inter_host_bytes_per_step\":" << json_number(j.bytes_per_step) << ",\"mib\":{";
    bool first = true;
    for (const auto& [op, mib] : j.mib) {
      out << (first ? "" : ",") << json_string(op) << ":" << json_number(mib);
      first = false;
    }
    out << "}}";
  }
  out << "]}\n";
  out.commit();
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  std::printf("%s\nbench GPT, ZeRO stage 3, codec_blockq (int8 weights, int4 gradients)\n",
              blas_line().c_str());
  ScratchDir scratch("zt-bench-codec");
  std::vector<KernelRate> kernels;
  std::vector<LossRun> losses;
  std::vector<LinkJob> jobs;
  if (o.part == "kernels" || o.part == "all") {
    kernels = run_kernels();
    print_kernels(kernels);
  }
  if (o.part == "loss" || o.part == "all") {
    losses = run_loss(o, scratch.path());
    print_loss(o, losses);
  }
  if (o.part == "link" || o.part == "all") {
    jobs = run_link(o, scratch.path());
    print_link(jobs);
  }
  write_json(o, kernels, losses, jobs);
  std::printf("\nresults: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_codec", argc, argv, zt::bench::run);
}
