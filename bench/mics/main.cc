// zt_bench_mics: MiCS / hpZ across hosts (docs/architecture.md, "Benchmarks"). Runs the bench
// GPT (bench/train's, ~10.8M parameters, fp32) at ZeRO stage 3 on 4 ranks in two simulated
// hosts (scripts/two_hosts.sh: two network namespaces joined by a veth pair, 2 ranks each,
// started torchrun-style), flat (states sharded over all 4 ranks) and with mics_shard_size = 2
// (sharded within each host, replicated across the two), on the link as it is and shaped by
// `tc` to slower rates. Reports per job the median step time and the bytes that crossed the
// link per step (the veth's own counters: TCP/IP included) next to the theory, and the MiCS
// arm's ratios to flat. Prints markdown tables, writes bench-results/mics.json; exits non-zero
// when a job failed. Needs root (network namespaces).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bench_util.h"
#include "common/child_process.h"
#include "common/shell.h"
#include "common/two_hosts.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

const char* kUsage =
    "usage: zt_bench_mics [--steps N] [--warmup W] [--rates R1,R2] [--json PATH] [--trainer P]\n"
    "  Trains the bench GPT at ZeRO stage 3 on 4 ranks in 2 simulated hosts (network\n"
    "  namespaces, needs root), flat and with zero.mics_shard_size = 2, per link rate; reports\n"
    "  step time and bytes between the hosts per step next to the theory.\n"
    "  --steps    optimizer steps per job (default 6)\n"
    "  --warmup   steps left out of the step time (default 2)\n"
    "  --rates    link rates, `tc` syntax, \"none\" = unshaped (default none,1gbit,200mbit)\n"
    "  --json     results file (default bench-results/mics.json)\n"
    "  --trainer  trainer executable (default: the one built with the bench)\n";

constexpr int kPerHost = 2, kHosts = 2, kWorld = kPerHost * kHosts;

struct Options {
  int steps = 6, warmup = 2;
  std::vector<std::string> rates = {"none", "1gbit", "200mbit"};
  std::string json = "bench-results/mics.json";
  std::string trainer = ZT_BENCH_TRAINER;
};

struct Arm {
  const char* name;
  int shard_size;  // ranks per shard group (kWorld: flat)
};
const Arm kArms[] = {{"flat stage 3", kWorld}, {"MiCS, groups of 2", kPerHost}};

struct Job {
  std::string rate, arm;
  int shard_size = 0;
  double step_s = 0;
  double bytes_per_step = 0, theory_per_step = 0;
  int64_t parameters = 0;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  const std::vector<std::string> known = {"--steps", "--warmup", "--rates", "--json", "--trainer"};
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, known, kUsage, flag, value)) {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (flag == "--steps") o.steps = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--warmup") o.warmup = static_cast<int>(parse_positive(value, flag, kUsage));
    if (flag == "--rates") o.rates = split_list(value);
    if (flag == "--json") o.json = value;
    if (flag == "--trainer") o.trainer = value;
  }
  if (o.warmup >= o.steps)
    throw ConfigError("--warmup must be below --steps\n" + std::string(kUsage));
  return o;
}

std::string hosts_script() { return two_hosts_script(ZT_BENCH_SOURCE_DIR); }
ShellResult hosts(const std::string& args) { return two_hosts(ZT_BENCH_SOURCE_DIR, args); }
double link_bytes(const std::string& name) {
  return zt::bench::link_bytes(ZT_BENCH_SOURCE_DIR, name, "zt_bench_mics");
}

// Bytes per step that must cross the hosts, by the algorithms zt runs (fp32, 4 bytes an element,
// psi parameters; small ops such as the loss average left out):
//   flat: every collective is a ring over the 4 ranks, whose links cross the hosts twice; a
//     link carries (n-1)/n of each collective, and a step gathers the parameters twice
//     (forward, backward) and reduce-scatters the gradients once: 2 x 3/4 x 3 x 4 psi.
//   MiCS: gathers and reduce-scatters stay in a host; each rank all-reduces its psi/k gradient
//     shard with its replica on the other host, sending 2 (R-1)/R of it: n x 4 psi / k.
double theory_bytes(int shard_size, int64_t psi) {
  const double p = static_cast<double>(psi) * 4;
  if (shard_size == kWorld) return kHosts * (kWorld - 1.0) / kWorld * 3 * p;
  const double replicas = static_cast<double>(kWorld) / shard_size;
  return kWorld * 2 * (replicas - 1) / replicas * p / shard_size;
}

// The median step time after the warm-up from rank 0's metrics.jsonl.
double median_step(const std::string& metrics, int warmup) {
  std::ifstream in(metrics);
  std::vector<double> times;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step_time_s")) continue;
    if (j["step"].get<int64_t>() > warmup) times.push_back(j["step_time_s"].get<double>());
  }
  if (times.empty()) throw IoError("zt_bench_mics: no step past the warm-up in " + metrics);
  return median(times);
}

int64_t parameters_of(const std::string& log) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find("model states per rank (");
    if (at != std::string::npos) return std::stoll(line.substr(at + 23));
  }
  throw IoError("zt_bench_mics: no parameter count in " + log);
}

Job run_job(const Options& o, const std::string& name, const std::string& rate, const Arm& arm,
            const std::string& dir) {
  const std::string out = dir + "/" + std::to_string(arm.shard_size), logs = out + "-logs";
  run_shell("mkdir -p " + shell_quote(logs));
  std::string command = hosts_script() + " run " + name + " " + std::to_string(kPerHost) + " " +
                        shell_quote(logs) + " " + shell_quote(o.trainer) + " --config " +
                        shell_quote(std::string(ZT_BENCH_SOURCE_DIR) + "/configs/zero3.toml");
  std::vector<std::string> sets = bench_gpt_overrides();
  sets.push_back("run.steps=" + std::to_string(o.steps));
  sets.push_back("run.out_dir=" + out);
  sets.push_back(std::string("data.path=") + ZT_BENCH_SOURCE_DIR + "/README.md");
  sets.push_back("zero.mics_shard_size=" + std::to_string(arm.shard_size));
  for (const std::string& kv : sets) command += " --set " + shell_quote(kv);
  const double before = link_bytes(name);
  const ShellResult r = run_shell(command);
  if (r.exit_code != 0) {
    throw CommError("zt_bench_mics: the " + std::string(arm.name) + " job on link " + rate +
                    " failed:\n" + r.output);
  }
  Job job;
  job.rate = rate;
  job.arm = arm.name;
  job.shard_size = arm.shard_size;
  job.bytes_per_step = (link_bytes(name) - before) / o.steps;
  job.step_s = median_step(out + "/metrics.jsonl", o.warmup);
  job.parameters = parameters_of(logs + "/rank0.log");
  job.theory_per_step = theory_bytes(arm.shard_size, job.parameters);
  return job;
}

double mb(double bytes) { return bytes / 1e6; }

void print_tables(const std::vector<Job>& jobs) {
  std::printf(
      "\n| link | arm | step s | between hosts MB/step | theory MB/step | measured/theory |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: |\n");
  for (const Job& j : jobs) {
    std::printf("| %s | %s | %.3f | %.1f | %.1f | %.3f |\n", j.rate.c_str(), j.arm.c_str(),
                j.step_s, mb(j.bytes_per_step), mb(j.theory_per_step),
                j.bytes_per_step / j.theory_per_step);
  }
  std::printf(
      "\nMiCS against flat, per link:\n\n| link | bytes between hosts | theory | step time |\n");
  std::printf("| --- | ---: | ---: | ---: |\n");
  for (size_t i = 0; i + 1 < jobs.size(); i += 2) {
    const Job &flat = jobs[i], &mics = jobs[i + 1];
    std::printf("| %s | %.3f | %.3f | %.3f (%s) |\n", flat.rate.c_str(),
                mics.bytes_per_step / flat.bytes_per_step,
                mics.theory_per_step / flat.theory_per_step, mics.step_s / flat.step_s,
                mics.step_s < flat.step_s ? "faster" : "slower");
  }
}

void write_json(const Options& o, const std::vector<Job>& jobs) {
  ResultsFile out(o.json);
  out << "{\"bench\":\"mics\",\"world\":" << kWorld << ",\"hosts\":" << kHosts
      << ",\"steps\":" << o.steps << ",\"warmup\":" << o.warmup << "," << blas_json()
      << ",\"jobs\":[";
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    out << (i ? "," : "") << "{\"link\":" << json_string(j.rate)
        << ",\"arm\":" << json_string(j.arm) << ",\"shard_size\":" << j.shard_size
        << ",\"parameters\":" << j.parameters << ",\"step_s\":" << json_number(j.step_s)
        << ",\"inter_host_bytes_per_step\":" << json_number(j.bytes_per_step)
        << ",\"theory_bytes_per_step\":" << json_number(j.theory_per_step) << "}";
  }
  out << "]}\n";
  out.commit();
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  const ShellResult can = hosts("check");
  if (can.exit_code != 0) throw ConfigError("zt_bench_mics: " + can.output);
  std::printf(
      "%s\nbench GPT, ZeRO stage 3, %d ranks in %d simulated hosts, %d steps (%d warm-up)\n",
      blas_line().c_str(), kWorld, kHosts, o.steps, o.warmup);
  const std::string name = "ztb" + std::to_string(getpid() % 100000);
  ScratchDir scratch("zt-bench-mics");
  std::vector<Job> jobs;
  for (const std::string& rate : o.rates) {
    const SimulatedHosts up(ZT_BENCH_SOURCE_DIR, name, rate, "zt_bench_mics");
    for (const Arm& arm : kArms) {
      jobs.push_back(run_job(o, name, rate, arm, scratch.path() + "/" + name));
      std::printf("  %s, link %s: %.3f s/step, %.1f MB/step between hosts\n", arm.name,
                  rate.c_str(), jobs.back().step_s, mb(jobs.back().bytes_per_step));
      std::fflush(stdout);
    }
  }
  print_tables(jobs);
  write_json(o, jobs);
  std::printf("\nresults: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_mics", argc, argv, zt::bench::run);
}
