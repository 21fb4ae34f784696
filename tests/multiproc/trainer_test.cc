// The trainer executable end to end: bad input gives one clear line and the right exit code;
// the smoke job runs on 2 local ranks; plugins list/describe; --plugin-dir; ranks failing
// together; the BLAS line of the run header.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <thread>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "ranks_by_hand.h"
#include "small_gpt_job.h"
#include "zt/host/blas.h"
#include "zt/host/launcher.h"

using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;
using zt::test::write_file;

namespace {

std::string trainer() { return ZT_TEST_TRAINER; }

zt::test::CommandResult run_with(const std::string& toml, const std::string& extra = "") {
  TempDir dir;
  write_file(dir.file("job.toml"), toml);
  return run_command(trainer() + " --config " + dir.file("job.toml") + " " + extra);
}

}  // namespace

TEST_CASE("the smoke job runs on 2 local ranks and verifies every collective") {
  auto r = run_command(trainer() + " --config " ZT_TEST_SOURCE_DIR
                                   "/configs/smoke.toml --set run.steps=2");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "zt smoke: 2 rank(s) over comm_ucx"));
  CHECK(contains(r.output, "data path: comm_ucx: UCX-mapped shared memory between the 2 ranks"));
  CHECK(contains(r.output, "collectives verified"));
  CHECK(contains(r.output, "smoke run OK"));
}

TEST_CASE("a job started with standard input and output closed writes its files as usual") {
  // Closed, descriptors 0 and 1 went to the next files the job opened: the flight recorder's
  // pipe took both, so every log line on stdout asked for a flight record (flight/ appeared in a
  // run that did not fail). The trainer now opens /dev/null in their place first.
  TempDir dir;
  const std::string job = zt::test::small_gpt_job(
      dir.file("out"), "--set run.steps=3 --set run.warmup_steps=0 --set run.log_every=1");
  auto r = run_command("{ exec 3>&1; " + job + " 2>&3 1>&- 0<&-; }");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("out/flight")));
  std::ifstream metrics(dir.file("out/metrics.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) {
    INFO(line);
    CHECK(line.rfind("{", 0) == 0);
  }
  CHECK(lines >= 3);
}

TEST_CASE("--nproc 3 on the command line overrides the config") {
  auto r = run_command(trainer() + " --config " ZT_TEST_SOURCE_DIR
                                   "/configs/smoke.toml --nproc 3 --set run.steps=1");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "zt smoke: 3 rank(s)"));
}

TEST_CASE("MASTER_PORT exported to trainer --nproc wins over launch.master_port") {
  // The config's port is taken; the "port in use" error says to pick another with MASTER_PORT,
  // which zt's own launcher used to ignore.
  const zt::test::ListeningSocket busy;
  const std::string run = "MASTER_PORT=" + std::to_string(zt::pick_free_port("127.0.0.1")) + " " +
                          trainer() +
                          " --config " ZT_TEST_SOURCE_DIR
                          "/configs/smoke.toml --nproc 2 --set run.steps=1 "
                          "--set launch.master_port=" +
                          std::to_string(busy.port());
  auto r = run_command(run);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "zt smoke: 2 rank(s)"));
}

TEST_CASE("--nproc 2 in a Slurm step of one task (srun --pty) starts 2 ranks, and the config's "
          "launch.nproc alone does not") {
  // The environment srun gives its one task; before, the process took it for the whole job and
  // trained alone as rank 0 of 1, --nproc or not.
  const std::string step =
      "env SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 "
      "SLURM_NODEID=0 SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 " +
      trainer() + " --config " ZT_TEST_SOURCE_DIR "/configs/smoke.toml --set run.steps=1";
  auto r = run_command(step + " --nproc 2");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "a Slurm step of one task: zt's launcher starts the 2 "
                           "ranks"));
  CHECK(contains(r.output, "zt smoke: 2 rank(s) over comm_ucx"));
  // smoke.toml's nproc = 2: one task per GPU (srun --ntasks=1 --gpus=1) stays one rank.
  r = run_command(step);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(contains(r.output, "a Slurm step of one task"));
  CHECK(contains(r.output, "zt smoke: 1 rank(s)"));
  // DeepSpeed's batch rule counts the 2 ranks --nproc starts there: a train_batch_size of 8 at
  // micro batch 2 is 2 micro steps (as 1 rank it was 4, then refused by the 2 ranks).
  TempDir dir;
  write_file(dir.file("ds.json"),
             R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2})");
  r = run_command(step + " --nproc 2 --deepspeed " + dir.file("ds.json") + " --print-config");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "grad_accum = 2"));
}

TEST_CASE("a Slurm rank runs SLURM_CPUS_PER_TASK threads only where its affinity mask has as "
          "many CPUs, and says so where it has fewer") {
  // srun of Slurm 22.05-23.02 does not take sbatch's --cpus-per-task and binds a task to one CPU
  // where the cluster binds: SLURM_CPUS_PER_TASK=2 on one CPU (taskset here) ran 2 threads.
  const auto srun_task_on = [](const std::string& cpus) {
    return "cd " ZT_TEST_SOURCE_DIR " && env SLURM_JOB_ID=4243 SLURM_STEP_ID=0 SLURM_PROCID=0 "
           "SLURM_NTASKS=1 SLURM_LOCALID=0 "
           "SLURM_NODEID=0 SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=1 "
           "SLURM_CPUS_PER_TASK=2 taskset -c " +
           cpus + " " + trainer() +
           " --config " ZT_TEST_SOURCE_DIR
           "/configs/zero3.toml --set run.steps=1 --set run.report=false --set "
           "checkpoint.every_steps=0 --set run.out_dir=";
  };
  TempDir dir;
  auto r = run_command(srun_task_on("0") + dir.file("one"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "zt: warning: SLURM_CPUS_PER_TASK=2, but this rank may run on 1 CPU(s) "
                           "(its affinity mask), so it runs 1 thread(s)"));
  CHECK(contains(r.output, "give srun --cpus-per-task=$SLURM_CPUS_PER_TASK"));
  if (std::thread::hardware_concurrency() >= 2) {
    r = run_command(srun_task_on("0,1") + dir.file("two"));
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(contains(r.output, "SLURM_CPUS_PER_TASK"));
  }
}

TEST_CASE("under another launcher, a --nproc that is neither its ranks on the host nor all of "
          "them is refused, and max_restarts is said to restart nothing") {
  // The smoke job as torchrun starts rank 0 of `world`, `local_world` of them on this host.
  const auto rank0_of = [](int world, int local_world) {
    return "env RANK=0 WORLD_SIZE=" + std::to_string(world) +
           " LOCAL_RANK=0 LOCAL_WORLD_SIZE=" + std::to_string(local_world) +
           " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(zt::pick_free_port("127.0.0.1")) +
           " " + trainer() +
           " --config " ZT_TEST_SOURCE_DIR "/configs/smoke.toml --set run.steps=1";
  };
  // Rank 0 of 1: before, --nproc 4 was dropped without a word.
  const std::string one = rank0_of(1, 1);
  auto r = run_command(one + " --nproc 4");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--nproc 4, but torchrun started this process as rank 0 of 1 (1 on "
                           "this host): its ranks are the job's; drop --nproc"));
  CHECK_FALSE(contains(r.output, "zt smoke:"));
  // The same from --set launch.nproc on the command line (a config's launch.nproc is no request:
  // configs/smoke.toml's own is 2).
  r = run_command(one + " --set launch.nproc=4");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "--set launch.nproc=4, but torchrun started this process as rank 0 of "
                           "1 (1 on this host): its ranks are the job's; drop --set launch.nproc"));
  // The same --nproc as the launcher's world is no contradiction.
  r = run_command(one + " --nproc 1 --max-restarts 2");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "zt smoke: 1 rank(s)"));
  CHECK(contains(r.output, "zt: warning: launch.max_restarts = 2 is zt's launcher's, and torchrun "
                           "started these ranks: it restarts none of them"));
  // Nor is the ranks per host (--nproc's meaning) of a job of two hosts: this rank goes on to
  // wait for its peer, which never comes (a communication error, not the config's).
  r = run_command(rank0_of(2, 1) + " --set launch.timeout_s=1 --nproc 1");
  INFO(r.output);
  CHECK(r.exit_code == 4);
  CHECK_FALSE(contains(r.output, "--nproc 1, but"));
}

TEST_CASE("bad config input: one clear line per problem, exit code 2") {
  auto r = run_with("[run]\ntask = \"smoke\"\n[zero]\nstage = 9\nbucket = 3\n");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "zt: config error: "));
  CHECK(contains(r.output, "job.toml:4:9: zero.stage = 9 is out of range"));
  CHECK(contains(r.output, "job.toml:5:1: unknown key 'bucket' in [zero]"));

  r = run_with("[run\n");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "job.toml:1:"));

  r = run_command(trainer() + " --config /nonexistent.toml");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "cannot read config file"));

  r = run_command(trainer() + " --bogus");
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "unknown argument '--bogus'"));
}

TEST_CASE("a [model] key the model's kind does not read is named once, and the job still runs") {
  auto r = run_with("[run]\ntask = \"smoke\"\n[model]\nkind = \"mlp\"\nn_layer = 24\n");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string line =
      "job.toml:5:11: model.n_layer is a key of model kind 'gpt', and this job's model is 'mlp'";
  CHECK(contains(r.output, line));
  CHECK(contains(r.output, "zt: warning: "));
  CHECK(r.output.find(line) == r.output.rfind(line));
}

TEST_CASE("a [plugin.<id>] table no role selects is named once, and the job still runs") {
  // shard_bucket is installed and configured, but the job shards with shard_tensor.
  auto r = run_with("[run]\ntask = \"smoke\"\n[plugins]\nshard = \"shard_tensor\"\n"
                    "[plugin.shard_bucket]\nbucket_mb = 8\n");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string line = "job.toml:6:13: [plugin.shard_bucket] configures shard_bucket (a shard "
                           "plugin), which no role of [plugins] selects";
  CHECK(contains(r.output, line));
  CHECK(contains(r.output, "zt: warning: "));
  CHECK(contains(r.output, "select it with plugins.shard (now \"shard_tensor\"), or remove the "
                           "table"));
  CHECK(r.output.find(line) == r.output.rfind(line));
  // trainer estimate (as ab and tune) tries compositions that select other plugins: the table
  // may be theirs, and is not named.
  TempDir dir;
  write_file(dir.file("job.toml"), zt::test::read_file(ZT_TEST_SOURCE_DIR "/configs/zero3.toml") +
                                       "\n[plugin.offload_nvme]\npath = \"" + dir.file("nvme") +
                                       "\"\n");
  r = run_command(trainer() + " --config " + dir.file("job.toml") + " --print-config");
  CHECK(contains(r.output, "[plugin.offload_nvme] configures offload_nvme"));
  r = run_command(trainer() + " estimate --config " + dir.file("job.toml"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(!contains(r.output, "no role of [plugins] selects"));
}

TEST_CASE("an unknown plugin id exits 3, listing what was found and where it looked") {
  auto r = run_with("[run]\ntask = \"smoke\"\n[plugins]\ncomm = \"comm_nope\"\n");
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "plugin 'comm_nope' not found"));
  CHECK(contains(r.output, "Found: codec_bf16, codec_blockq, comm_ucx"));
  CHECK(contains(r.output, "Looked in:"));
}

TEST_CASE("--print-config prints the resolved config with defaults and overrides") {
  auto r = run_command(trainer() + " --config " ZT_TEST_SOURCE_DIR
                                   "/configs/smoke.toml --set zero.stage=0 "
                                   "--set plugin.comm_ucx.chunk_kb=256 --print-config");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "[zero]\nstage = 0\n"));
  CHECK(contains(r.output, "chunk_kb = 256\n"));
  CHECK(contains(r.output, "prefetch_units = 1  # default"));
}

TEST_CASE("--help alone prints the overview, and with a job's flags training's own options") {
  auto r = run_command(trainer() + " --help");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "usage: trainer [COMMAND] [OPTIONS]"));
  // Training's help was printed by no command line (only --help's overview, without its flags).
  r = run_command(trainer() + " --config " ZT_TEST_SOURCE_DIR "/configs/smoke.toml --help");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "usage: trainer --config FILE"));
  CHECK(contains(r.output, "--max-restarts N"));
}

TEST_CASE("plugins list and describe") {
  auto r = run_command(trainer() + " plugins list");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "comm_ucx"));
  r = run_command(trainer() + " plugins describe comm_ucx");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "chunk_kb (integer, default 1024"));
  CHECK(contains(r.output, "options, in [plugin.comm_ucx]:"));
  // A codec's options go in its role's table, which a config accepts ([plugin.<codec>] it refuses).
  r = run_command(trainer() + " plugins describe codec_blockq");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "options, in [codec.weights] (plugins.codec_weights) or "
                           "[codec.gradients] (plugins.codec_gradients), as it serves:"));
  CHECK_FALSE(contains(r.output, "[plugin.codec_blockq]"));
  r = run_command(trainer() + " plugins list --plugin-dir " ZT_TEST_FIXTURE_DIR);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "BROKEN"));
  CHECK(contains(r.output, "wrong_fingerprint"));
  r = run_command(trainer() + " plugins describe nothing_here");
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "plugin 'nothing_here' not found"));
}

TEST_CASE("a rank of the trainer that cannot rendezvous exits 4 naming rank 0's address") {
  auto r = run_command("RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 " + trainer() +
                       " --config " ZT_TEST_SOURCE_DIR
                       "/configs/smoke.toml --set launch.timeout_s=1");
  INFO(r.output);
  CHECK(r.exit_code == 4);
  CHECK(contains(r.output,
                 "zt: [rank 1] comm error: rendezvous: rank 1 cannot reach rank 0 at 127.0.0.1:1"));
}

TEST_CASE("ranks that disagree on their hosts' layout are refused before a codec placed by host "
          "issues a collective") {
  // Each rank reads its ranks per host from its own launcher's variables; with a codec limited
  // to links across hosts, ranks that read different layouts chose different collectives.
  TempDir dir;
  const std::string job = zt::test::quiet_small_gpt_job(
      dir.file("run"),
      "--set zero.codec_scope='\"across_hosts\"' --set plugins.codec_weights='\"codec_blockq\"' "
      "--set launch.timeout_s=60");
  struct Layout {
    std::string rank0, rank1, refusal;  // LOCAL_RANK and LOCAL_WORLD_SIZE of each
  };
  const std::vector<Layout> layouts{
      {"LOCAL_RANK=0 LOCAL_WORLD_SIZE=1", "LOCAL_RANK=1 LOCAL_WORLD_SIZE=2",
       "but the launcher gave hosts different numbers of ranks (1 to 2"},
      {"LOCAL_RANK=1 LOCAL_WORLD_SIZE=2", "LOCAL_RANK=0 LOCAL_WORLD_SIZE=2",
       "but rank 1 is not at its place on its host"}};
  for (const Layout& layout : layouts) {
    CAPTURE(layout.refusal);
    const auto r = zt::test::run_two_ranks(dir, {layout.rank0, layout.rank1}, job);
    const std::string& rank0 = r.rank0;
    INFO(r.output);
    INFO(rank0);
    CHECK(contains(r.output, "rank 1 exit 2"));
    CHECK(contains(r.output, "rank 0 exit 2"));
    CHECK(contains(r.output + rank0, layout.refusal));
  }
}

TEST_CASE("a run.out_dir rank 0 cannot make ends every rank at once, naming rank 0's error") {
  // Made (and checkpoint.dir taken) by rank 0 alone once the job is built: the others went on
  // into the first step, and rank 0's communicator waited launch.timeout_s for them in its
  // closing barrier before the error was said.
  TempDir dir;
  zt::test::write_file(dir.file("file"), "a file, not a folder");
  const auto r = run_command(
      zt::test::quiet_small_gpt_job(dir.file("file/run"), "--set launch.timeout_s=120"));
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "[rank 0] io error: cannot create the folder " + dir.file("file/run")));
  CHECK(contains(r.output, "[rank 1] io error: rank 1: rank 0 failed to take the job's folders: "
                           "cannot create the folder " +
                               dir.file("file/run")));
  CHECK_FALSE(contains(r.output, "no progress"));
  CHECK_FALSE(contains(r.output, "step 1/"));
}

TEST_CASE("a metrics file whose storage stops answering ends the job with exit 5, naming it") {
  // A FIFO without a reader blocks its open as a file system that stopped answering blocks a
  // call: rank 0 stuck there outlived its peers (srun leaves such a rank until the job's limit).
  // Each open, write and close of metrics.jsonl may take half of launch.timeout_s (at least half
  // checkpoint.timeout_s and 10 s): 15 s, before rank 1's collective times out at 30 s.
  TempDir dir;
  std::filesystem::create_directories(dir.file("run"));
  REQUIRE(mkfifo(dir.file("run/metrics.jsonl").c_str(), 0600) == 0);
  const auto r = run_command(zt::test::quiet_small_gpt_job(
      dir.file("run"), "--set launch.timeout_s=30 --set checkpoint.timeout_s=2 --set run.steps=2"));
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "io error: opening " + dir.file("run/metrics.jsonl") +
                               " has not returned after 15.0 s"));
  CHECK(contains(r.output, "check that run.out_dir's storage answers"));
  CHECK(contains(r.output, "rank 0 (pid "));
}

TEST_CASE("a two-level gather whose ranks' launcher did not say which share a host is refused") {
  // zero.mics_hierarchical_params_gather splits the shard group by host: with no ranks per host
  // (no LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE or SLURM_NTASKS_PER_NODE) it was left out
  // without a word.
  TempDir dir;
  const std::string job = zt::test::quiet_small_gpt_job(
      dir.file("run"), "--set zero.mics_hierarchical_params_gather=true --set launch.timeout_s=60");
  const std::string unset = "env -u LOCAL_WORLD_SIZE -u LOCAL_RANK -u OMPI_COMM_WORLD_LOCAL_SIZE "
                            "-u SLURM_NTASKS_PER_NODE";
  const auto r = zt::test::run_two_ranks(dir, {unset, unset}, job);
  INFO(r.output);
  INFO(r.rank0);
  CHECK(contains(r.output, "rank 1 exit 2"));
  CHECK(contains(r.output, "rank 0 exit 2"));
  CHECK(contains(r.output + r.rank0,
                 "zero.mics_hierarchical_params_gather = true gathers in two levels by host, but "
                 "the launcher did not say which ranks share a host"));
  CHECK_FALSE(contains(r.output + r.rank0, "step 1/"));
}

TEST_CASE("killing one rank of `trainer --nproc 2` stops the job and names the rank and signal") {
  // A long smoke job; the test kills its rank 1 from outside, as a person or a scheduler would
  // (the OOM killer's kills are named as such: host_faults_test.cc; this one must not be). The
  // launcher's newest child a second after two are up: a short-lived child it starts first (a
  // probe) made the second child rank 0 at times.
  TempDir dir;
  write_file(dir.file("kill.sh"),
             trainer() + " --config " ZT_TEST_SOURCE_DIR
                         "/configs/smoke.toml --set run.steps=1000000 &\n"
                         "pid=$!; victim=''\n"
                         "for i in $(seq 1 200); do\n"
                         "  victim=$(ps -o pid= --ppid $pid | sed -n 2p | tr -d ' ')\n"
                         "  [ -n \"$victim\" ] && break; sleep 0.05\n"
                         "done\n"
                         "sleep 1; victim=$(ps -o pid= --ppid $pid | tail -n 1 | tr -d ' ')\n"
                         "kill -9 $victim; echo \"victim $victim\"; wait $pid; "
                         "echo \"launcher exit $?\"\n");
  auto r = run_command("bash " + dir.file("kill.sh"));
  INFO(r.output);
  CHECK(contains(r.output, "launcher exit 137"));
  // The rank killed is named, with its pid.
  std::smatch victim;
  REQUIRE(std::regex_search(r.output, victim, std::regex("victim ([0-9]+)")));
  CHECK(std::regex_search(r.output,
                          std::regex("zt: error: rank 1 \\(pid " + victim[1].str() +
                                     "\\) was killed by signal 9 \\(Killed\\); stopping the "
                                     "other 1 rank\\(s\\)")));
  CHECK_FALSE(contains(r.output, "OOM killer"));
}

namespace {

// A small, fast variant of the shipped stage-3 config: 3 steps.
std::string tiny_train(const std::string& out_dir, const std::string& extra = "") {
  return zt::test::small_gpt_job(out_dir, "--set run.steps=3 " + extra);
}

}  // namespace

TEST_CASE("training: stage 3 on 2 ranks writes metrics per step and a summary against theory") {
  TempDir dir;
  // Every parameter sharded (none kept whole for being small): each rank holds its 1/2 of the
  // model states, what ZeRO's theory counts (16 bytes per parameter over 2 ranks, fp32 Adam).
  auto r = run_command(tiny_train(dir.path().string(), "--set zero.param_persistence_threshold=0"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "ZeRO stage 3"));
  CHECK(contains(r.output, "summary: 3 steps (0 skipped)"));
  // The table's rows: rank, ..., total, theory, ratio, peak RSS.
  const std::regex row(
      "\\n  ([01]) .* ([0-9.]+) MiB +([0-9.]+) MiB +([0-9]+\\.[0-9]{3}) +[0-9.]+ MiB");
  int rows = 0;
  for (auto m = std::sregex_iterator(r.output.begin(), r.output.end(), row);
       m != std::sregex_iterator(); ++m, ++rows) {
    INFO((*m)[0].str());
    CHECK(std::stod((*m)[4].str()) == doctest::Approx(1.0).epsilon(0.01));
  }
  CHECK(rows == 2);
  std::string metrics = zt::test::read_file(dir.file("metrics.jsonl"));
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 3);
  CHECK(contains(metrics, "\"step\":3,\"loss\":"));
  CHECK(contains(metrics, "\"rank\":1,\"params\":"));
  CHECK(contains(metrics, "\"reduce_scatter\":{\"calls\":"));
}

TEST_CASE("a rank's threads are the CPUs its process may run on, shared by the host's ranks") {
  // One rank under `taskset -c 0` computes on one thread, though the host has more: the host's
  // count oversubscribed the CPUs a cpuset (Slurm, a container) gave the job.
  if (std::thread::hardware_concurrency() < 2) {
    ZT_SKIP("the host has one CPU: one thread whatever the mask says");
  }
  TempDir dir;
  const auto r = run_command("taskset -c 0 " +
                             tiny_train(dir.path().string(), "--set launch.nproc=1"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "1024^3, 1 thread(s) x 1 rank(s) per host"));
}

TEST_CASE("training: every stage reaches the same loss and state (same init, same global batch)") {
  // Every step's loss to 17 digits (the final line's 4 decimals hid any gap below 5e-5), within
  // fp32 rounding: the stages sum the ranks' gradients in other orders. The last update shows in
  // no loss: the final checkpoints, every parameter and Adam moment, within fp32's tolerance.
  TempDir dir;
  std::vector<double> first;
  for (int stage : {0, 1, 2, 3}) {
    CAPTURE(stage);
    const std::string out = dir.file("stage" + std::to_string(stage));
    auto r = run_command(tiny_train(
        out, "--set zero.stage=" + std::to_string(stage) + " --set checkpoint.every_steps=1000"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    const std::vector<double> losses = zt::test::losses_of(out + "/metrics.jsonl");
    REQUIRE(losses.size() == 3);
    if (first.empty()) first = losses;
    for (size_t i = 0; i < losses.size(); ++i) {
      CAPTURE(i);
      CHECK(losses[i] == doctest::Approx(first[i]).epsilon(1e-6));
    }
    zt::test::check_close_state(zt::test::step_folder(dir.file("stage0") + "/checkpoints", 3),
                                zt::test::step_folder(out + "/checkpoints", 3));
  }
}

TEST_CASE("training: 1 rank x grad_accum 3 and 3 ranks x grad_accum 1 train on the same samples") {
  std::vector<double> losses[2];
  const char* splits[2] = {"--nproc 1 --set data.grad_accum=3",
                           "--nproc 3 --set data.grad_accum=1"};
  TempDir dir;
  for (int i = 0; i < 2; ++i) {
    auto r = run_command(tiny_train(dir.file("run" + std::to_string(i)),
                                    std::string(splits[i]) +
                                        " --set data.micro_batch=2 --set run.steps=4 "
                                        "--set zero.stage=1 --set checkpoint.every_steps=1000"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    losses[i] = zt::test::losses_of(dir.file("run" + std::to_string(i)) + "/metrics.jsonl");
  }
  REQUIRE(losses[0].size() == 4);
  REQUIRE(losses[1].size() == 4);
  for (size_t s = 0; s < 4; ++s) {
    INFO("step " << s + 1 << ": " << losses[0][s] << " vs " << losses[1][s]);
    // Only the order of fp32 reductions differs.
    CHECK(std::abs(losses[0][s] - losses[1][s]) <= 1e-5 * std::abs(losses[0][s]));
  }
  CHECK(losses[0][0] != losses[0][3]);  // it trained
  // And the last step's update, which no loss shows.
  zt::test::check_close_state(zt::test::step_folder(dir.file("run0") + "/checkpoints", 4),
                              zt::test::step_folder(dir.file("run1") + "/checkpoints", 4));
}

TEST_CASE("training: activation checkpointing gives the same losses and state as without") {
  // Every step's loss and the final state, bit for bit: the recompute runs the same operations.
  TempDir dir;
  std::vector<double> losses[2];
  for (int ac = 0; ac < 2; ++ac) {
    auto r = run_command(tiny_train(dir.file("ac" + std::to_string(ac)),
                                    std::string("--set checkpoint.every_steps=1000 "
                                                "--set model.activation_checkpointing=") +
                                        (ac ? "true" : "false")));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    losses[ac] = zt::test::losses_of(dir.file("ac" + std::to_string(ac)) + "/metrics.jsonl");
  }
  REQUIRE(losses[0].size() == 3);
  CHECK(losses[0] == losses[1]);
  zt::test::check_same_state(zt::test::step_folder(dir.file("ac0") + "/checkpoints", 3),
                             zt::test::step_folder(dir.file("ac1") + "/checkpoints", 3));
}

TEST_CASE("training: a NaN loss in fp32 stops with the step number and a hint, exit 6") {
  TempDir dir;
  auto r = run_command(
      tiny_train(dir.path().string(),
                 "--set run.steps=6 --set run.warmup_steps=0 --set plugin.optim_hybrid_adam.lr=1e9 "
                 "--set zero.gradient_clipping=0"));
  INFO(r.output);
  CHECK(r.exit_code == 6);
  CHECK(contains(r.output, "numeric error: loss is"));
  CHECK(contains(r.output, "nothing of the step was applied: lower the learning rate"));
  // With optimizer states on NVMe and neither clipping nor loss scaling, streamed groups update
  // in backward: the loss is read before its backward instead of at the step, and the error
  // cannot promise the step was left whole.
  auto eager = run_command(tiny_train(
      dir.file("eager"), "--set run.steps=6 --set run.warmup_steps=0 "
                         "--set plugin.optim_hybrid_adam.lr=1e9 --set zero.gradient_clipping=0 "
                         "--set plugins.offload_optimizer=offload_nvme --set "
                         "plugin.offload_nvme.path=" +
                             dir.file("nvme")));
  INFO(eager.output);
  CHECK(eager.exit_code == 6);
  CHECK(contains(eager.output, "numeric error: loss is"));
  CHECK(contains(eager.output, "(micro step 1) in Float; lower the learning rate"));
}

TEST_CASE("training: a global batch that does not divide, a model too large: config errors") {
  TempDir dir;
  auto r = run_command(tiny_train(dir.path().string(), "--set data.global_batch=10"));
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(
      r.output,
      "data.global_batch = 10 does not equal micro_batch (4) x grad_accum (1) x ranks (2) = 8"));
  r = run_command(
      trainer() +
      " --config " ZT_TEST_SOURCE_DIR "/configs/zero3.toml --set model.preset=gpt2-xl "
      "--set model.n_layer=0 --set model.n_head=0 --set model.d_model=0 --set model.seq_len=0 "
      "--set model.vocab=0 --set launch.memory_limit_gb=2");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "over the 2.00 GiB of launch.memory_limit_gb"));
  CHECK(contains(r.output, "offload to files: plugins.offload_optimizer"));
}

TEST_CASE("memory the OS refuses is an I/O error with the way out, not a bug to report") {
  // A 2^40-parameter layer, let through the memory-fit check by a huge launch.memory_limit_gb:
  // its 4 TiB allocation is refused at once under the kernel's heuristic overcommit (mode 0) or
  // strict accounting (2). Under "always" (1) it would be granted and touched: skipped there.
  const std::string mode = zt::test::read_file("/proc/sys/vm/overcommit_memory");
  if (mode.empty() || mode[0] == '1') {
    ZT_SKIP("vm.overcommit_memory is 1: a 4 TiB allocation would be granted, not refused");
  }
  TempDir dir;
  auto r = run_command(trainer() +
                       " --config " ZT_TEST_SOURCE_DIR
                       "/configs/zero1.toml --set model.kind=\"mlp\" --set "
                       "data.kind=\"synthetic\" --set model.width=1048576 --set "
                       "model.depth=1 --set launch.nproc=1 --set "
                       "launch.memory_limit_gb=16000000 --set run.steps=1 --set "
                       "run.out_dir=" +
                       dir.file("out"));
  INFO(r.output);
  CHECK(r.exit_code == 5);
  CHECK(contains(r.output, "io error: out of memory: "));
  CHECK(contains(r.output, "see what a rank needs with trainer estimate"));
  CHECK_FALSE(contains(r.output, "please report"));
}

TEST_CASE("--plugin-dir on a run reaches the config and every rank") {
  // The config the launcher validates finds a plugin that lives only in the --plugin-dir folder.
  auto r = run_command(
      trainer() +
      " --config " ZT_TEST_SOURCE_DIR "/configs/zero3.toml --plugin-dir " ZT_TEST_FIXTURE_DIR
      " --set plugins.shard=shard_fixture --set plugin.shard_fixture.bucket_mb=3 --print-config");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "[plugin.shard_fixture]\nbucket_mb = 3\n"));
  CHECK(contains(r.output, "dirs = [\"" ZT_TEST_FIXTURE_DIR "\"]"));
  // estimate (as tune and ab) searches --plugin-dir first and the config's plugins.dirs after it:
  // the fixture lives only in the latter (the --plugin-dir folder is empty). It replaced them.
  TempDir empty;
  r = run_command(trainer() +
                  " estimate --config " ZT_TEST_SOURCE_DIR
                  "/configs/zero3.toml --set 'plugins.dirs=[\"" ZT_TEST_FIXTURE_DIR
                  "\"]' --set plugins.shard=shard_fixture --plugin-dir " +
                  empty.path().string());
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "shard_fixture is a test fixture: it lays out nothing"));
  // The smoke job loads every plugin it can find: its ranks see the folder's broken fixtures.
  r = run_command(trainer() +
                  " --config " ZT_TEST_SOURCE_DIR
                  "/configs/smoke.toml --set run.steps=1 --plugin-dir " ZT_TEST_FIXTURE_DIR);
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "some plugins cannot be loaded"));
  CHECK(contains(r.output, "wrong_fingerprint"));
  // A codec whose create() returns null is refused by name: it trained without a codec, saying
  // the gradients were coded.
  TempDir dir;
  r = run_command(zt::test::small_gpt_job(dir.file("out"),
                                          "--plugin-dir " ZT_TEST_FIXTURE_DIR
                                          " --set plugins.codec_gradients=null_codec"));
  INFO(r.output);
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "plugin 'null_codec' (codec): create() returned null"));
  // A small job with the fixtures' plugins and `extra` ends in a plugin error holding `said`.
  const auto refused = [&](const std::string& extra, const std::string& said) {
    const auto run = run_command(
        zt::test::small_gpt_job(dir.file("out"), "--plugin-dir " ZT_TEST_FIXTURE_DIR " " + extra));
    INFO(run.output);
    CHECK(run.exit_code == 3);
    CHECK(contains(run.output, said));
    return run.output;
  };
  // A codec that decodes a NaN as 0 is refused when made: the engine finds an overflowing step
  // by the decoded values and would have trained on it.
  refused("--set plugins.codec_gradients=nan_blind_codec",
          "plugin 'nan_blind_codec' (codec, plugins.codec_gradients) breaks the codec contract of "
          "zt/codec.h: nan at element 5 of 4096 decodes as the finite 0");
  // The same codec in a live A/B arm is refused at the start, not at the arm's first switch.
  const std::string arm = refused(
      "--set run.steps=4 --set ab.switch_every=2 --set 'ab.arms=[\"plugins.shard="
      "shard_bucket\", \"plugins.codec_gradients=nan_blind_codec\"]'",
      "live A/B arm B (ab.arms[1]): plugin 'nan_blind_codec' (codec, "
      "plugins.codec_gradients) breaks the codec contract");
  CHECK_FALSE(contains(arm, "step 1"));
  // A communicator that says rank 0 on every rank (each would train alone), or whose collective
  // returns no Work (a crash at its wait), is refused by name.
  refused("--nproc 2 --set plugins.comm=lying_comm",
          "plugin 'lying_comm' (comm) made a communicator of rank 0 of 2 for rank 1 of 2");
  refused("--nproc 2 --set plugins.comm=lying_comm --set plugin.lying_comm.lie=no_work",
          "communicator 'lying_comm' (world) returned no Work for its ");
  // An optimizer whose states are fp16: sized by it, then recorded as fp32 in checkpoints.
  refused("--set plugins.optimizer=optim_sgd_fixture "
          "--set plugin.optim_sgd_fixture.fp16_momentum=true",
          "plugin 'optim_sgd_fixture' (optimizer): its state_dtype() is Half; zt keeps optimizer "
          "states and masters in Float or BFloat16 only");
}

TEST_CASE("the plugins commands read only plugins.dirs from --config and --set") {
  TempDir dir;
  write_file(dir.file("dirs.toml"), "[plugins]\ndirs = [\"" ZT_TEST_FIXTURE_DIR "\"]\n");
  auto r = run_command(trainer() + " plugins describe shard_fixture --config " +
                       dir.file("dirs.toml"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "bucket_mb (integer, default 25"));
  r = run_command(trainer() + " plugins list --config " + dir.file("dirs.toml"));
  CHECK(r.exit_code == 3);  // the fixtures folder holds broken plugins on purpose
  CHECK(contains(r.output, "shard_fixture"));
  write_file(dir.file("bad.toml"), "[plugins]\ndirs = \"" ZT_TEST_FIXTURE_DIR "\"\n");
  r = run_command(trainer() + " plugins list --config " + dir.file("bad.toml"));
  CHECK(r.exit_code == 2);
  CHECK(contains(r.output, "bad.toml:2:8: plugins.dirs must be an array of strings"));
  // Without --config, --set plugins.dirs names them (it was dropped: shard_fixture not found).
  r = run_command(trainer() + " plugins describe shard_fixture --set 'plugins.dirs=[\"" +
                  ZT_TEST_FIXTURE_DIR + "\"]'");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "bucket_mb (integer, default 25"));
}

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE(
    "ranks failing the same way: whole lines, the first failing rank's error last, its exit code") {
  TempDir dir;
  auto r = run_command(
      tiny_train(dir.path().string(), "--nproc 3 --set data.path=" + dir.file("missing.txt")));
  INFO(r.output);
  CHECK(r.exit_code == 5);  // ErrorKind::kIo
  std::vector<std::string> rank_errors, lines = lines_of(r.output);
  for (const auto& line : lines) {
    CHECK(line.find("zt: ", 1) == std::string::npos);  // no line holds two messages
    if (line.rfind("zt: [rank ", 0) == 0) rank_errors.push_back(line);
  }
  REQUIRE(!rank_errors.empty());
  CHECK(contains(rank_errors[0], "] io error: cannot open"));
  REQUIRE(!lines.empty());
  const std::string& last = lines.back();
  CHECK(last.rfind("zt: error: rank ", 0) == 0);
  CHECK(contains(last, "exited with code 5"));
  CHECK(contains(last, "reported: io error: cannot open"));
  // The rank named last is the one whose error printed first.
  CHECK(contains(rank_errors[0], "zt: [rank " + last.substr(16, last.find(' ', 16) - 16) + "] "));
}

TEST_CASE("the run header names the BLAS core, and who chose it") {
  // Without the caller's OPENBLAS_CORETYPE, so OpenBLAS picks on its own; what it picks depends
  // on this CPU and OpenBLAS release, so the header is checked against zt's rule either way.
  const std::string smoke = "env -u OPENBLAS_CORETYPE -u ZT_OPENBLAS_DETECTED_CORE " + trainer() +
                            " --config " ZT_TEST_SOURCE_DIR "/configs/smoke.toml --set run.steps=1";
  auto r = run_command(smoke);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const size_t at = r.output.find("BLAS: ");
  REQUIRE(at != std::string::npos);
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  if (contains(line, "not OpenBLAS")) {
    ZT_SKIP_UNLESS_CI("the trainer's BLAS is not OpenBLAS (" + line +
                      "), so there is no core to check; scripts/setup.sh installs "
                      "libopenblas0-openmp");
  }
  const zt::CpuFeatures cpu = zt::cpu_features();
  auto word_after = [&](const std::string& key) {
    size_t from = line.find(key);
    REQUIRE(from != std::string::npos);
    from += key.size();
    return line.substr(from, line.find_first_of(" )", from) - from);
  };
  const std::string core = word_after(" core ");
  std::string picked = core;  // what OpenBLAS picks for itself here
  if (contains(line, "(set by zt; ")) {
    picked = word_after(" picks ");
    CHECK(zt::recommended_openblas_core(picked, cpu) == core);  // a misdetected CPU, fixed
  } else {
    CHECK(zt::recommended_openblas_core(core, cpu) == "");  // a CPU OpenBLAS knows: unchanged
  }
  // Ranks started by another launcher: the one-line fix exactly when OpenBLAS picks a weak core.
  int port = zt::pick_free_port("127.0.0.1");
  r = run_command("RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                  " " + smoke);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string better = zt::recommended_openblas_core(picked, cpu);
  CHECK(contains(r.output, "core " + picked));
  CHECK(contains(r.output, "export OPENBLAS_CORETYPE=" + better) == !better.empty());
}

TEST_CASE(
    "an OpenBLAS that misdetects this CPU: zt sets the core for its ranks, never over the user's") {
  // The fixture reports Prescott, as OpenBLAS 0.3.21 does on newer Xeons. (ASan, in a sanitizer
  // build, must not insist on coming first in the library list.)
  const std::string run =
      "env -u OPENBLAS_CORETYPE -u ZT_OPENBLAS_DETECTED_CORE ASAN_OPTIONS=verify_asan_link_order=0 "
      "LD_PRELOAD=" ZT_TEST_MISDETECTING_OPENBLAS " ";
  const std::string smoke = trainer() + " --config " ZT_TEST_SOURCE_DIR
                                        "/configs/smoke.toml --set run.steps=1";
  const std::string best = zt::recommended_openblas_core("Prescott", zt::cpu_features());
  if (best.empty()) ZT_SKIP("this CPU runs no OpenBLAS core stronger than Prescott");
  // "OpenBLAS 0.3.21 picks ..." where the real library answers for its version; a LibTorch built
  // on another BLAS (PyTorch's wheels use MKL) leaves the fixture alone, without one.
  const std::string fixed = " core " + best + " (set by zt; OpenBLAS ";
  for (const char* nproc : {"2", "1"}) {  // spawned ranks; a single process restarts itself
    CAPTURE(nproc);
    auto r = run_command(run + smoke + " --nproc " + nproc);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.output, fixed));
    CHECK(contains(r.output, " picks Prescott on this CPU)"));
  }
  // Ranks started by another launcher: the one-line fix.
  int port = zt::pick_free_port("127.0.0.1");
  auto r = run_command(run + "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                       std::to_string(port) + " " + smoke);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output,
                 " core Prescott, slower than this CPU allows: export OPENBLAS_CORETYPE=" + best));
  // The user's own choice stays, even a weak one.
  r = run_command(run + "OPENBLAS_CORETYPE=Prescott " + smoke);
  INFO(r.output);
  CHECK(contains(
      r.output,
      " core Prescott (OPENBLAS_CORETYPE from your environment; this CPU runs " + best + ")"));
  CHECK(!contains(r.output, "set by zt"));
}

TEST_CASE("the trainer restarts itself with glibc's huge-page tunable, keeping a value given") {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::string mode((std::istreambuf_iterator<char>(thp)), std::istreambuf_iterator<char>());
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    ZT_SKIP("this host has no transparent huge pages, or has them off: the tunable changes "
            "nothing here");
  }
  const std::string smoke = trainer() + " --config " ZT_TEST_SOURCE_DIR
                                        "/configs/smoke.toml --set run.steps=1";
  const std::string other_launcher = "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                     std::to_string(zt::pick_free_port("127.0.0.1")) + " ";
  // A single process, a rank srun or torchrun started, and the ranks zt's own launcher starts,
  // without the variable or with other tunables.
  for (const std::string& how :
       {"env -u GLIBC_TUNABLES " + smoke + " --nproc 1",
        "env -u GLIBC_TUNABLES " + other_launcher + smoke,
        "env -u GLIBC_TUNABLES " + smoke + " --nproc 2",
        "GLIBC_TUNABLES=glibc.malloc.arena_max=4 " + other_launcher + smoke}) {
    CAPTURE(how);
    auto r = run_command(how);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.output, "blocks of 4 MiB or more in transparent huge pages "
                             "(glibc.malloc.hugetlb=1; THP "));
  }
  // The restarted rank keeps the executable's name (killall trainer, top), not "exe": rank 0
  // of 2, waiting for its peer, is asked after its restart, then stopped.
  const auto named = run_command(
      "env -u GLIBC_TUNABLES RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
      std::to_string(zt::pick_free_port("127.0.0.1")) + " " + smoke +
      " --set launch.timeout_s=30 >/dev/null 2>&1 & sleep 3; echo \"comm=$(ps -o comm= -p $!)\"; "
      "kill $!; wait");
  INFO(named.output);
  CHECK(contains(named.output, "comm=trainer\n"));
  // The user's own value stands, and the header names it.
  auto r = run_command("GLIBC_TUNABLES=glibc.malloc.hugetlb=0 " + other_launcher + smoke);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "4 KiB pages (glibc.malloc.hugetlb=0 from the environment)"));
}

TEST_CASE("--deepspeed: a DeepSpeed ZeRO-2 config with CPU offload trains, origins printed") {
  TempDir dir;
  const std::string ds = ZT_TEST_SOURCE_DIR "/tests/fixtures/deepspeed/zero2_offload_cpu.json";
  const std::string job = zt::test::small_gpt_job(dir.file("run"), "--set run.steps=3") +
                          " --deepspeed " + ds;
  const auto printed = run_command(job + " --print-config");
  INFO(printed.output);
  CHECK(printed.exit_code == 0);
  // configs/zero3.toml sets the stage, the compute dtype and the lr, and wins; the rest comes
  // from the JSON.
  CHECK(contains(printed.output, "stage = 3\n"));
  CHECK(contains(printed.output, "compute = \"fp32\"\n"));
  CHECK(contains(printed.output, "lr = 0.001\n"));
  CHECK(contains(printed.output, "offload_optimizer = \"offload_cpu\"  # from " + ds +
                                     ": zero_optimization.offload_optimizer.device"));
  CHECK(contains(printed.output, "pin_memory = true  # from " + ds +
                                     ": zero_optimization.offload_optimizer.pin_memory"));
  // 2e8 bf16 elements (the JSON's dtype) in MiB.
  CHECK(contains(printed.output, "allgather_bucket_mb = 381.4697265625  # from " + ds +
                                     ": zero_optimization.allgather_bucket_size"));
  const auto trained = run_command(job);
  INFO(trained.output);
  CHECK(trained.exit_code == 0);
  CHECK(contains(trained.output, "offload: optimizer states + master -> offload_cpu"));
  CHECK(contains(trained.output, "summary: 3 steps"));
  // An unsupported key stops the job before any rank starts, unless lenient.
  write_file(dir.file("bad.json"),
             R"({"zero_optimization": {"stage": 2}, "amp": {"enabled": true}})");
  const std::string bad = zt::test::small_gpt_job(dir.file("bad"), "--set run.steps=1") +
                          " --deepspeed " + dir.file("bad.json");
  const auto refused = run_command(bad);
  CHECK(refused.exit_code == 2);
  CHECK(contains(refused.output, "amp is not supported by zt: zt has no Apex AMP"));
  const auto lenient = run_command(bad + " --deepspeed-lenient");
  INFO(lenient.output);
  CHECK(lenient.exit_code == 0);
  CHECK(
      contains(lenient.output, "zt: warning: " + dir.file("bad.json") + ": amp is not supported"));
  // A single process starts itself again as the rank once it read its config (glibc's tunables):
  // the warning still comes once.
  const auto single = run_command("env -u GLIBC_TUNABLES " + bad +
                                  " --deepspeed-lenient --nproc 1");
  INFO(single.output);
  CHECK(single.exit_code == 0);
  const std::string warning = "zt: warning: " + dir.file("bad.json") + ": amp is not supported";
  const size_t first = single.output.find(warning);
  CHECK(first != std::string::npos);
  CHECK(single.output.find(warning, first + 1) == std::string::npos);
}

TEST_CASE("[eval]: the validation loss is one number at world 1, 2 and 3, logged and reported") {
  // The same global batch (12 samples: micro_batch 2 x grad_accum 6 / world) trains the same
  // model at every world size; evaluated every 2 steps on 10 held-out samples (data.val_fraction:
  // the test corpus's last tenth), shared out among 1, 2 or 3 ranks (3: padded), at stage 3.
  std::vector<std::vector<double>> losses;
  for (int world : {1, 2, 3}) {
    CAPTURE(world);
    TempDir dir;
    auto r = run_command(zt::test::small_gpt_job(
        dir.file("out"),
        "--set launch.nproc=" + std::to_string(world) +
            " --set data.micro_batch=2 --set data.grad_accum=" + std::to_string(6 / world) +
            " --set run.steps=4 --set data.val_fraction=0.1 --set "
            "eval.every_steps=2 --set eval.batches=5 --set eval.micro_batch=2"));
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    CHECK(contains(r.output, "eval after step 2: val loss "));
    CHECK(contains(r.output, "validation: loss "));
    const std::string metrics = zt::test::read_file(dir.file("out/metrics.jsonl"));
    std::vector<double> mine;
    for (size_t at = metrics.find("\"val_loss\":"); at != std::string::npos;
         at = metrics.find("\"val_loss\":", at + 1)) {
      mine.push_back(std::stod(metrics.substr(at + 11)));
    }
    CHECK(mine.size() == 2);  // steps 2 and 4 (the last: at_end adds none)
    CHECK(contains(zt::test::read_file(dir.file("out/report.html")), "validation loss"));
    losses.push_back(mine);
  }
  for (const auto& l : losses) {
    REQUIRE(l.size() == losses.front().size());
    for (size_t i = 0; i < l.size(); ++i)
      CHECK(std::abs(l[i] - losses.front()[i]) <= 1e-6 * losses.front()[i]);
  }
}
