// Live A/B inside a training run: the switch from one arm to the next, and the job's end.
#include <unistd.h>

#include <ATen/ATen.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ab/ab_html.h"
#include "ab/switch_folder.h"
#include "report/run_metrics.h"
#include "run/train_run.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host_memory.h"

namespace zt::trainer {

double switch_arm(TrainRun& run, Store& store, std::chrono::milliseconds timeout, size_t to,
                  int64_t step) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckpointSettings settings = run.settings.checkpoint;
  settings.dir = run.settings.ab.switch_dir;
  settings.every_steps = 1;
  settings.keep_last = 1;
  settings.keep_best.clear();
  settings.async = false;
  if (!run.switch_saves) {
    run.switch_saves = std::make_unique<TrainCheckpoints>(
        settings, store, run.env.rank, run.env.world, "ab-" + checkpoint_job(run, store, timeout));
  }
  const CheckpointMeta meta = checkpoint_meta(run, step);
  run.switch_saves->save(*run.setup.engine, step, meta);
  run.switch_saves->finish();
  // Rank 0 publishes the folder: every rank opens it only after that.
  run.setup.comm->barrier()->wait();
  settings.resume = "auto";
  const std::unique_ptr<CheckpointReader> saved = open_resume_checkpoint(settings, false, timeout);
  if (!saved || saved->step() != step) {
    throw InternalError("live A/B: the state saved after step " + std::to_string(step) +
                        " is not the newest checkpoint under " + settings.dir);
  }
  std::unique_ptr<ModelSource> source = models::make_model_source(run.model->shape,
                                                                  run.model->seed);
  recompose(run.setup, run.live.settings[to].engine, run.catalog, run.env, store, timeout, *source);
  run.source = std::move(source);
  run.setup.engine->load_checkpoint(*saved);
  run.arm = to;
  // No rank leaves while another still reads the folder the next switch replaces.
  run.setup.comm->barrier()->wait();
  // Each step's peak_rss is then the new arm's: VmHWM only rises, so every arm after the
  // hungriest reported that arm's peak as its own.
  reset_process_peak_rss();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_switch_dir_shared(const TrainRun& run, Store& store, std::chrono::milliseconds timeout) {
  const std::string probe =
      (std::filesystem::path(run.live.switch_dir) / ".zt-shared-probe").string();
  const std::string key = "ab/switch_dir_probe";
  const std::string where = run.settings.ab.switch_dir_where + ": ab.switch_dir = '" +
                            run.live.switch_dir + "'";
  // What rank 0 publishes when it cannot write the token: the others then fail with its reason
  // instead of reading nothing and calling the folder unshared.
  const std::string failed = "failed\n";
  if (run.env.rank == 0) {
    std::string text = std::to_string(::getpid()) + "-" +
                       std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    std::ofstream out(probe, std::ios::trunc);
    out << text;
    out.close();  // NFS reports a full disk or quota at close
    if (!out) {
      const int err = errno;
      text = failed + "cannot write " + probe + " (" +
             (err != 0 ? std::strerror(err) : "the write failed") +
             "), the token every rank must read back";
    }
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  }
  const std::vector<uint8_t> value = store.get(key, timeout);
  const std::string published(value.begin(), value.end());
  const bool unwritten = published.rfind(failed, 0) == 0;
  std::string seen;
  if (!unwritten) std::getline(std::ifstream(probe), seen);
  // One collective before any rank stops: rank 0 serves the store, and must not exit while
  // another rank still reads the key from it.
  at::Tensor elsewhere = at::tensor({unwritten || seen == published ? 0.0 : 1.0}, at::kDouble);
  all_reduce_host(*run.setup.comm, elsewhere, ReduceOp::kSum);
  if (unwritten) {
    throw IoError(where + ": rank 0 " + published.substr(failed.size()) +
                  "; a switch saves the state there: make room there or give a folder the job "
                  "can write");
  }
  std::error_code left;  // a token left behind is harmless; failing here, rank 0 failed alone
  if (run.env.rank == 0) std::filesystem::remove(probe, left);
  const auto ranks = static_cast<int64_t>(elsewhere.item<double>());
  if (ranks == 0) return;
  throw ConfigError(where + " is not one folder for every rank: " + std::to_string(ranks) + " of " +
                    std::to_string(run.env.world) +
                    " rank(s) do not see what rank 0 wrote there (a local disk or /dev/shm of "
                    "each host), and a switch reads the state back from it; give a folder every "
                    "host shares, or compare the arms as separate jobs with trainer ab");
}

void finish_live_ab(TrainRun& run, const std::string& out_dir, bool leader) {
  run.setup.comm->barrier()->wait();
  if (!leader) return;
  remove_switch_states(run.live.switch_dir);
  const std::string metrics = out_dir + "/metrics.jsonl";
  const RunMetrics steps = read_run_metrics(metrics);
  if (steps.switches.empty()) {
    std::printf("ab: no switch happened (run.steps <= ab.switch_every): no A/B report\n");
    return;
  }
  if (run.live.arms.size() > 2) {
    std::printf("ab: %zu arms: each step names its arm in %s (the A/B report compares two: "
                "trainer ab-report %s --arms A,C)\n",
                run.live.arms.size(), metrics.c_str(), out_dir.c_str());
    std::fflush(stdout);
    return;
  }
  // The training succeeded: a report that cannot be made is said, not turned into a failure.
  try {
    const AbResult result = live_ab_result(steps, /*warmup=*/1);
    write_ab_json(result, out_dir + "/ab.json");
    write_ab_html(result, out_dir + "/report.html");
    std::printf("ab: %s\nab: report %s/report.html, every number in %s/ab.json\n",
                result.verdict.c_str(), out_dir.c_str(), out_dir.c_str());
  } catch (const Error& e) {
    std::printf("ab: no A/B report: %s\n", e.what());
  }
  std::fflush(stdout);
}

}  // namespace zt::trainer
