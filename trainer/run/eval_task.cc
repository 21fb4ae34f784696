#include "run/eval_task.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "data/data_source.h"
#include "data/run_tokenizer.h"
#include "report/report_file.h"
#include "run/checkpointing.h"
#include "run/evaluation.h"
#include "run/loaded_model.h"
#include "run/stop_signals.h"
#include "settings/job_settings.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace zt::trainer {

namespace {

void write_result(const std::string& path, const nlohmann::json& j) {
  // Through a temporary file: an earlier result stays whole until this one is.
  write_report_file(path, j.dump() + "\n");
}

}  // namespace

// Held-out data must be named: a file's training windows are not validation samples.
void check_eval_inputs(const JobSettings& job) {
  if (job.data.kind == "synthetic" || job.eval.has_data) return;
  throw ConfigError("trainer eval needs validation data, and data.kind = \"" + job.data.kind +
                    "\" (" + job.data.kind_where +
                    ") names none: set data.val_path (a second file of the same kind) or "
                    "data.val_fraction (the held-out share of data.path the job trained "
                    "without), e.g. --set data.val_fraction=0.1");
}

int run_eval(const JobSettings& job, PluginCatalog& catalog, Store& store, const RankEnv& env,
             std::chrono::milliseconds timeout, const std::string& checkpoint,
             const std::string& out_path) {
  share_cores_between_local_ranks();
  check_eval_inputs(job);
  const std::string path = out_path.empty() ? job.run.out_dir + "/eval.json" : out_path;
  const std::unique_ptr<CheckpointReader> opened = open_rank0_checkpoint(
      [&] {
    auto reader = open_checkpoint_within(checkpoint, timeout);
    // The result's folder, once the checkpoint opened (its errors come first), on rank 0 which
    // writes it; the others learn of a failure as of the checkpoint's.
    make_folder_of(path, out_path.empty() ? "the result in run.out_dir" : "--out " + out_path);
    return reader;
      },
      "trainer eval --checkpoint " + checkpoint, checkpoint, store, "eval/checkpoint", env.rank,
      timeout);
  const CheckpointReader& reader = *opened;
  LoadedModel loaded = load_checkpointed_model(job, catalog, env, store, timeout, reader);
  const Composition& s = loaded.setup;
  const auto val = data::make_val_data(job.data, models::model_inputs(loaded.model->shape),
                                       loaded.model->shape.kind, job.eval.micro_batch);
  // A stop signal on any rank stops every rank before the same pass: nothing is written, and
  // the way out removes the tiers' files. Agreed every 8 passes and before the last (each is a
  // wait for the device where the comm's tensors live); one process asks only itself. A signal
  // during the last pass lets the evaluation finish and write its result.
  const auto stop_if_signalled = [&](int64_t pass, int64_t passes) {
    if (env.world > 1 && pass % 8 != 0 && pass + 1 != passes) return;
    if (const int sig = env.world == 1 ? stop_signal_received() : agreed_stop_signal(*s.comm)) {
      throw StoppedBySignal(sig, "trainer eval stopped after " + std::to_string(pass) + " of " +
                                     std::to_string(passes) + " forward passes; no result written");
    }
  };
  const EvalEvent e = evaluate(*s.engine, loaded.own_forward, *s.comm, *loaded.model, *val,
                               job.eval, env.rank, env.world, s.options, reader.step(),
                               stop_if_signalled);
  if (env.rank != 0) return 0;
  const std::string& state = reader.meta().trainer_state;
  const std::string split_note =
      state.empty()
          ? ""
          : held_out_split_note(TrainerState::from_json(state, reader.folder()),
                                reader.meta().config_toml, val->held_out_split(), job.config_toml);
  std::fputs((val_fraction_note(reader.meta().config_toml, job.config_toml) + split_note +
              unsaved_buffers_note(loaded.model->shape))
                 .c_str(),
             stdout);
  const std::string composition = "world " + std::to_string(env.world) + ", ZeRO stage " +
                                  std::to_string(s.options.stage) + ", " + s.shard_id +
                                  ", compute " + job.run.compute;
  char ppl[48] = "";
  if (e.perplexity) std::snprintf(ppl, sizeof ppl, ", perplexity %.3f", std::exp(e.loss));
  // Bits per byte of text: the loss per token in bits over the text bytes a token stands for,
  // comparable across tokenizers (and with byte-level models).
  const double bytes_per_token = e.perplexity ? data::text_bytes_per_token(job.data) : 0;
  const double bits_per_byte = bytes_per_token > 0 ? e.loss / std::log(2.0) / bytes_per_token : 0;
  char bpb[64] = "";
  if (bits_per_byte > 0) {
    std::snprintf(bpb, sizeof bpb, ", %.4f bits per byte (%.3f bytes/token)", bits_per_byte,
                  bytes_per_token);
  }
  // A model of vectors (the MLP, a TorchScript regression) has no tokens: its loss is per sample.
  std::printf("eval: %s (step %lld, saved by: %s)\n  on %s: validation loss %.6f%s%s%s "
              "over %lld samples in %.2f s\n",
              reader.folder().c_str(), static_cast<long long>(reader.step()),
              reader.meta().saved_by.c_str(), composition.c_str(), e.loss,
              e.perplexity ? " per token" : "", ppl, bpb, static_cast<long long>(e.samples),
              e.seconds);
  nlohmann::json j = {{"event", "eval"},       {"checkpoint", reader.folder()},
                      {"step", reader.step()}, {"val_loss", e.loss},
                      {"samples", e.samples},  {"seconds", e.seconds},
                      {"world", env.world},    {"composition", composition}};
  if (e.perplexity) j["val_ppl"] = std::exp(e.loss);
  if (bits_per_byte > 0) j["val_bits_per_byte"] = bits_per_byte;
  write_result(path, j);
  std::printf("  written to %s\n", path.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace zt::trainer
