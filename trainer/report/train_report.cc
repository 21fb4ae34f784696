#include "report/train_report.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host_memory.h"

namespace zt::trainer {

namespace {

std::string eta(double seconds) {
  int s = static_cast<int>(seconds);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

void print_totals(const TrainSummary& s) {
  const std::string resumed = s.resumed_at > 0 ? "; resumed at step " + std::to_string(s.resumed_at)
                                               : "";
  std::printf("\nsummary: %lld steps (%lld skipped%s), final loss %.4f, %.0f tokens/s, "
              "%.2f s/step\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.skipped), resumed.c_str(),
              s.final_loss, s.tokens_per_step * s.steps / s.seconds, s.seconds / s.steps);
  if (s.val_step > 0 && s.val_perplexity) {
    std::printf("validation: loss %.4f, perplexity %.2f after step %lld\n", s.val_loss,
                std::exp(s.val_loss), static_cast<long long>(s.val_step));
  } else if (s.val_step > 0) {
    std::printf("validation: loss %.4f after step %lld\n", s.val_loss,
                static_cast<long long>(s.val_step));
  }
}

// The "step" of a metrics.jsonl line, or -1 for a line without one (a line cut by a kill).
int64_t step_of_line(const std::string& line) {
  const std::string key = "\"step\":";
  const size_t at = line.find(key);
  if (at == std::string::npos || line.empty() || line.back() != '}') return -1;
  return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

// Writes `kept` over the start of `path` and cuts it there: no new blocks, where a full disk
// refused the copy (kept is a part of the file). Not atomic; only for that case.
bool rewrite_in_place(const std::string& path, const std::string& kept) {
  std::FILE* f = std::fopen(path.c_str(), "r+");
  if (!f) return false;
  const bool written = std::fwrite(kept.data(), 1, kept.size(), f) == kept.size() &&
                       std::fflush(f) == 0 &&
                       ::ftruncate(fileno(f), static_cast<off_t>(kept.size())) == 0;
  return std::fclose(f) == 0 && written;
}

// Keeps the lines of `path` up to step `last` (what a resumed run continues), replacing the file
// by rename so a failure leaves it whole; on a full disk or quota, in place.
void keep_lines_up_to(const std::string& path, int64_t last) {
  std::ifstream in(path);
  if (!in) return;  // a new out_dir: nothing to keep
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    const int64_t step = step_of_line(line);
    if (step >= 0 && step <= last) kept += line + "\n";
  }
  in.close();
  const std::string tmp = path + ".tmp";
  std::FILE* out = std::fopen(tmp.c_str(), "w");
  bool copied = out != nullptr && std::fputs(kept.c_str(), out) >= 0;
  int error = copied ? 0 : errno;
  if (out != nullptr && std::fclose(out) != 0 && copied) {
    copied = false;
    error = errno;
  }
  if (copied && std::rename(tmp.c_str(), path.c_str()) == 0) return;
  if (copied) error = errno;
  std::remove(tmp.c_str());  // a partial copy took what room was left
  if ((error == ENOSPC || error == EDQUOT) && rewrite_in_place(path, kept)) return;
  throw IoError("cannot rewrite metrics file " + path +
                " for the resumed run: " + std::strerror(error) +
                (error == ENOSPC || error == EDQUOT
                     ? "; free space on its disk, or give run.out_dir a folder with room"
                     : "; set run.out_dir to a writable folder"));
}

// Bytes rank memory `x` holds in tier `t`: the roles it serves.
int64_t tier_bytes(const RankMemory& x, const TrainSummary::Tier& t) {
  return (t.holds_optimizer ? x.offload_optimizer + x.offload_grads : 0) +
         (t.holds_params ? x.offload_param : 0);
}

void print_memory_table(const TrainSummary& s) {
  std::printf("model states per rank (%lld parameters, stage %d, %d ranks), "
              "by where they live:\n",
              static_cast<long long>(s.parameters), s.stage, s.world);
  std::printf("  %-5s %11s %11s %11s %11s %11s", "rank", "params", "grads", "master", "optim",
              "compute");
  for (const auto& t : s.tiers) std::printf(" %13s", t.id.c_str());
  std::printf(" %11s %11s %7s %11s\n", "total", "theory", "ratio", "peak RSS");
  for (size_t r = 0; r < s.memory.size(); ++r) {
    const RankMemory& x = s.memory[r];
    std::printf("  %-5zu %11s %11s %11s %11s %11s", r, mib_text(x.params).c_str(),
                mib_text(x.grads).c_str(), mib_text(x.master).c_str(),
                mib_text(x.optimizer_states).c_str(), mib_text(x.model_states()).c_str());
    for (const auto& t : s.tiers) std::printf(" %13s", mib_text(tier_bytes(x, t)).c_str());
    std::printf(" %11s %11s %7.3f %11s\n", mib_text(x.total_model_states()).c_str(),
                mib_text(s.theory_bytes).c_str(),
                static_cast<double>(x.total_model_states()) / s.theory_bytes,
                mib_text(x.peak_rss).c_str());
  }
  if (s.memory.empty() || s.memory[0].codec_residuals == 0) return;
  std::printf("  besides: the gradient codec's error-feedback residuals, %s per rank (fp32, the "
              "padded model)\n",
              mib_text(s.memory[0].codec_residuals).c_str());
}

void print_offload_io(const TrainSummary& s) {
  if (s.tiers.empty()) return;
  std::printf("offload I/O (rank 0):");
  for (const auto& t : s.tiers) {
    std::printf(" %s read %s in %lld requests, wrote %s in %lld, own buffers %s;", t.id.c_str(),
                mib_text(t.stats.bytes_read).c_str(), static_cast<long long>(t.stats.reads),
                mib_text(t.stats.bytes_written).c_str(), static_cast<long long>(t.stats.writes),
                mib_text(t.stats.staging_bytes).c_str());
  }
  std::printf(" engine tile/fetch buffers %s (peak %s)\n",
              mib_text(s.memory[0].offload_staging).c_str(),
              mib_text(s.memory[0].offload_staging_peak).c_str());
}

// Rank 0's step time by part, when the engine measured it.
void print_times(const TrainSummary& s) {
  const TimeSplit t = split_times(s.times);
  if (t.total() <= 0 || s.steps <= 0) return;
  const double n = static_cast<double>(s.steps);
  std::printf("time per step (rank 0): compute %.3f s, read wait %.3f s, write wait %.3f s, "
              "comm wait %.3f s, optimizer %.3f s (engine %.3f s of %.3f s)\n",
              t.compute / n, t.read_wait / n, t.write_wait / n, t.comm_wait / n, t.optimizer / n,
              t.total() / n, s.seconds / n);
}

// Model FLOPs utilisation over the run's steps.
void print_mfu(const TrainSummary& s) {
  if (s.steps <= 0 || s.seconds <= 0) return;
  if (s.flops_per_step <= 0) {
    std::printf("MFU: unknown (the model does not declare its FLOPs)\n");
    return;
  }
  const double per_rank = s.flops_per_step * static_cast<double>(s.steps) / s.world / s.seconds;
  if (s.peak_per_rank <= 0) {
    std::printf("MFU: unknown (%s; %.2f GFLOP/s per rank, %.3g FLOP per step)\n",
                s.peak_how.c_str(), per_rank / 1e9, s.flops_per_step);
    return;
  }
  std::printf("MFU: %.1f%% (%.2f GFLOP/s per rank of a peak of %.2f: %s; %.3g FLOP per step)\n",
              s.peak_per_rank > 0 ? 100 * per_rank / s.peak_per_rank : 0.0, per_rank / 1e9,
              s.peak_per_rank / 1e9, s.peak_how.c_str(), s.flops_per_step);
}

void print_ops(const CommStats& stats) {
  for (int i = 0; i < kNumCommOps; ++i) {
    if (stats.ops[i].calls == 0) continue;
    std::printf(" %s %llu (%s)", comm_op_name(static_cast<CommOp>(i)),
                static_cast<unsigned long long>(stats.ops[i].calls),
                mib_text(static_cast<double>(stats.ops[i].bytes)).c_str());
  }
}

uint64_t wire_bytes(const CommStats& stats) {
  uint64_t sent = 0;
  for (const auto& op : stats.ops) sent += op.wire_bytes;
  return sent;
}

// All of this rank's collectives, then (MiCS) those of each group with the bytes it sent, which
// show what stays inside a group and what crosses groups.
void print_collectives(const TrainSummary& summary) {
  std::printf("collectives:");
  for (int i = 0; i < kNumCommOps; ++i) {
    std::printf(" %s %llu (%s)", comm_op_name(static_cast<CommOp>(i)),
                static_cast<unsigned long long>(summary.comm.ops[i].calls),
                mib_text(static_cast<double>(summary.comm.ops[i].bytes)).c_str());
  }
  std::printf("\n");
  if (summary.comm_groups.empty()) return;
  std::printf("sharding: %s\n", summary.sharding.c_str());
  for (const auto& [role, stats] : summary.comm_groups) {
    std::printf("  %s:", role.c_str());
    print_ops(stats);
    std::printf("; sent %s\n", mib_text(static_cast<double>(wire_bytes(stats))).c_str());
  }
}

}  // namespace

void print_summary(const TrainSummary& summary) {
  print_totals(summary);
  print_memory_table(summary);
  print_offload_io(summary);
  print_times(summary);
  print_mfu(summary);
  print_collectives(summary);
  std::printf("metrics: %s/metrics.jsonl\n", summary.out_dir.c_str());
}

TimeSplit split_times(const EngineTimes& t) {
  TimeSplit s;
  s.read_wait = t.read_wait;
  s.write_wait = t.write_wait;
  s.comm_wait = t.comm_wait;
  s.optimizer = t.optimizer;
  s.compute = std::max(
      0.0, t.forward_backward + t.step - t.read_wait - t.write_wait - t.comm_wait - t.optimizer);
  return s;
}

namespace {

// a + sign * b, field by field.
EngineTimes combined(const EngineTimes& a, const EngineTimes& b, double sign) {
  EngineTimes d;
  d.forward_backward = a.forward_backward + sign * b.forward_backward;
  d.step = a.step + sign * b.step;
  d.optimizer = a.optimizer + sign * b.optimizer;
  d.comm_wait = a.comm_wait + sign * b.comm_wait;
  d.read_wait = a.read_wait + sign * b.read_wait;
  d.write_wait = a.write_wait + sign * b.write_wait;
  return d;
}

}  // namespace

EngineTimes times_since(const EngineTimes& now, const EngineTimes& before) {
  return combined(now, before, -1);
}

EngineTimes add_times(const EngineTimes& a, const EngineTimes& b) { return combined(a, b, 1); }

RankMemory measure_memory(const MemoryReport& m, int stage) {
  RankMemory r;
  // Stages 0-2 keep full parameters between steps; stage 3 keeps its shards and the
  // persistent small groups (gathered buffers come and go with the units).
  r.params = stage < 3 ? m.params_gathered : m.params_shard + m.persistent_params;
  r.grads = m.grads;
  r.master = m.master_params;
  r.optimizer_states = m.optimizer_states;
  r.gathered_peak = m.params_gathered_peak;
  r.offload_optimizer = m.offload_optimizer;
  r.offload_param = m.offload_param;
  r.offload_grads = m.offload_grads;
  r.offload_staging = m.offload_staging;
  r.offload_staging_peak = m.offload_staging_peak;
  r.codec_residuals = m.codec_residuals;
  // 0 where the kernel does not say (the tables show 0.0 MiB rather than a negative size).
  r.rss = std::max<int64_t>(0, process_rss_bytes());
  r.peak_rss = std::max<int64_t>(0, process_peak_rss_bytes());
  return r;
}

std::vector<RankMemory> gather_memory(Communicator& comm, const RankMemory& mine) {
  const int n = comm.size();
  constexpr int kFields = 13;
  at::Tensor local = at::tensor(
                         {mine.params, mine.grads, mine.master, mine.optimizer_states,
                          mine.gathered_peak, mine.rss, mine.peak_rss, mine.offload_optimizer,
                          mine.offload_param, mine.offload_grads, mine.offload_staging,
                          mine.offload_staging_peak, mine.codec_residuals},
                         at::kLong)
                         .to(at::kDouble);
  at::Tensor all = at::empty({kFields * n}, at::kDouble);
  all_gather_host(comm, all, local);  // comm_nccl's ranks gather on their GPUs
  std::vector<RankMemory> out(n);
  auto a = all.accessor<double, 1>();
  for (int r = 0; r < n; ++r) {
    auto f = [&](int i) { return static_cast<int64_t>(a[r * kFields + i]); };
    out[r] = {f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9), f(10), f(11), f(12)};
  }
  return out;
}

namespace {

constexpr const char* kMetricsIoWayOut =
    "check that run.out_dir's storage answers; storage this slow but working needs a longer "
    "launch.timeout_s or checkpoint.timeout_s (each open, write and close of metrics.jsonl may "
    "take half of the longer)";

}  // namespace

TrainReport::TrainReport(const std::string& path, int64_t total_steps, int64_t log_every,
                         int64_t resumed_at, std::chrono::milliseconds io_limit)
    : path_(path), io_limit_(io_limit), total_steps_(total_steps), log_every_(log_every) {
  if (path.empty()) return;
  if (resumed_at > 0) keep_lines_up_to(path, resumed_at);
  {
    const FileIoDeadline deadline("opening " + path, io_limit_, kMetricsIoWayOut);
    file_ = std::fopen(path.c_str(), resumed_at > 0 ? "a" : "w");
  }
  if (!file_) {
    throw IoError("cannot write metrics file " + path + ": " + std::strerror(errno) +
                  "; set run.out_dir to a writable folder");
  }
  tty_ = isatty(STDOUT_FILENO) == 1;
}

TrainReport::~TrainReport() {
  if (!file_) return;
  int closed = 0;
  {
    // Unwinding an error too: a close that never returns ends the process with this file's line
    // in place of that error's (the storage is the cause then).
    const FileIoDeadline deadline("closing " + path_, io_limit_, kMetricsIoWayOut);
    closed = std::fclose(file_);
  }
  if (closed != 0 && lines_lost_ == 0) {
    // NFS reports a full disk or a quota at close: lines written before may be lost with it.
    std::fprintf(stderr,
                 "zt: warning: closing %s failed (%s): its last lines may be missing; free "
                 "space on its disk, or give run.out_dir a folder with room, for the next run\n",
                 path_.c_str(), std::strerror(errno));
    return;
  }
  if (lines_lost_ > 0) {
    std::fprintf(stderr,
                 "zt: warning: %lld line(s) of %s were not written (%s); it ends before "
                 "them\n",
                 static_cast<long long>(lines_lost_), path_.c_str(), std::strerror(write_error_));
  }
}

void TrainReport::append(const std::string& line) {
  if (lines_lost_ > 0) {
    ++lines_lost_;  // after a failure the file stays as it was, so it never holds a torn line
    return;
  }
  const FileIoDeadline deadline("appending a line to " + path_, io_limit_, kMetricsIoWayOut);
  const long before = std::ftell(file_);
  if (std::fputs(line.c_str(), file_) >= 0 && std::fflush(file_) == 0) return;
  const int error = errno;
  // What part of the line reached the file goes: readers take the file line by line.
  std::clearerr(file_);
  if (before >= 0 && ::ftruncate(fileno(file_), before) == 0) std::fseek(file_, before, SEEK_SET);
  write_failed(error);
  lines_lost_ = 1;
}

void TrainReport::write_failed(int error) {
  write_error_ = error;
  // Said at once, and training goes on: the step's state is in memory and in its checkpoints;
  // only this record of it is short.
  std::fprintf(stderr,
               "zt: warning: cannot append to %s (%s): the metrics of the steps from here on are "
               "not written (training goes on); free space on its disk, or give run.out_dir a "
               "folder with room, for the next run\n",
               path_.c_str(), std::strerror(error));
}

namespace {

// A double as JSON: a non-finite one (a diverged loss, an overflowed gradient norm) is null, as
// JSON has no NaN; `nan` in the file made every reader refuse the whole run.
struct JsonReal {
  double v;
};
std::ostream& operator<<(std::ostream& out, JsonReal x) {
  if (std::isfinite(x.v)) return out << x.v;
  return out << "null";
}

// The payload bytes of every collective so far.
uint64_t collective_bytes(const CommStats& comm) {
  uint64_t bytes = 0;
  for (const auto& op : comm.ops) bytes += op.bytes;
  return bytes;
}

}  // namespace

void TrainReport::start_step(const CommStats& comm, const OffloadStats& io) {
  comm_bytes_before_ = collective_bytes(comm);
  read_before_ = io.bytes_read;
  written_before_ = io.bytes_written;
}

void TrainReport::log(const StepMetrics& m, const std::vector<RankMemory>& memory,
                      const CommStats& comm, const OffloadStats& io) {
  if (!file_) return;
  elapsed_ += m.step_seconds;
  ++steps_logged_;
  std::ostringstream js;
  js.precision(8);
  // The loss with every digit a double has, so runs can be compared bit for bit (resume tests).
  js << "{\"step\":" << m.step << ",\"loss\":" << std::setprecision(17) << JsonReal{m.loss}
     << std::setprecision(8) << ",\"lr\":" << JsonReal{m.lr}
     << ",\"loss_scale\":" << JsonReal{m.loss_scale} << ",\"grad_norm\":" << JsonReal{m.grad_norm}
     << ",\"skipped\":" << (m.skipped ? "true" : "false")
     << ",\"step_time_s\":" << JsonReal{m.step_seconds}
     << ",\"tokens_per_s\":" << JsonReal{m.tokens_per_s};
  if (!m.arm.empty()) js << ",\"arm\":" << nlohmann::json(m.arm).dump();
  js << ",\"memory\":[";
  for (size_t r = 0; r < memory.size(); ++r) {
    const auto& x = memory[r];
    js << (r ? "," : "") << "{\"rank\":" << r << ",\"params\":" << x.params
       << ",\"grads\":" << x.grads << ",\"master\":" << x.master
       << ",\"optimizer_states\":" << x.optimizer_states << ",\"gathered_peak\":" << x.gathered_peak
       << ",\"rss\":" << x.rss << ",\"peak_rss\":" << x.peak_rss
       << ",\"offload_optimizer\":" << x.offload_optimizer
       << ",\"offload_param\":" << x.offload_param << ",\"offload_grads\":" << x.offload_grads
       << ",\"offload_staging\":" << x.offload_staging
       << ",\"offload_staging_peak\":" << x.offload_staging_peak;
    if (x.codec_residuals > 0) js << ",\"codec_residuals\":" << x.codec_residuals;
    js << "}";
  }
  js << "]";
  const TimeSplit t = split_times(m.times);
  if (t.total() > 0) {
    js << ",\"times\":{\"compute_s\":" << t.compute << ",\"read_wait_s\":" << t.read_wait
       << ",\"write_wait_s\":" << t.write_wait << ",\"comm_wait_s\":" << t.comm_wait
       << ",\"optimizer_s\":" << t.optimizer << "}";
  }
  js << ",\"comm\":{";
  for (int i = 0; i < kNumCommOps; ++i) {
    js << (i ? "," : "") << "\"" << comm_op_name(static_cast<CommOp>(i))
       << "\":{\"calls\":" << comm.ops[i].calls << ",\"bytes\":" << comm.ops[i].bytes
       << ",\"wire_bytes\":" << comm.ops[i].wire_bytes << "}";
  }
  js << "},\"offload_io\":{\"bytes_read\":" << io.bytes_read << ",\"reads\":" << io.reads
     << ",\"bytes_written\":" << io.bytes_written << ",\"writes\":" << io.writes << "}";
  // What this step alone moved (rank 0), by kind.
  const uint64_t comm_bytes = collective_bytes(comm);
  // A counter below its last value restarted from 0: a live A/B switch builds new tiers.
  const auto since = [](auto now, auto before) { return now >= before ? now - before : now; };
  js << ",\"step_bytes\":{\"collectives\":" << since(comm_bytes, comm_bytes_before_)
     << ",\"offload_read\":" << since(io.bytes_read, read_before_)
     << ",\"offload_written\":" << since(io.bytes_written, written_before_) << "}";
  comm_bytes_before_ = comm_bytes;
  read_before_ = io.bytes_read;
  written_before_ = io.bytes_written;
  if (m.flops > 0) {
    js << ",\"flops\":" << JsonReal{m.flops}
       << ",\"flops_per_s_per_rank\":" << JsonReal{m.flops_per_s};
    if (m.mfu > 0) js << ",\"mfu\":" << JsonReal{m.mfu};
  }
  js << "}\n";
  append(js.str());

  if (m.step % log_every_ != 0 && m.step != total_steps_) return;
  double remaining = elapsed_ / steps_logged_ * (total_steps_ - m.step);
  char mfu[32] = "";
  if (m.mfu > 0) std::snprintf(mfu, sizeof(mfu), "  MFU %.1f%%", 100 * m.mfu);
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld/%lld  loss %.4f  lr %.2e  %s%.0f tok/s%s  ETA %s",
                static_cast<long long>(m.step), static_cast<long long>(total_steps_), m.loss, m.lr,
                m.skipped ? "(skipped: overflow)  " : "", m.tokens_per_s, mfu,
                eta(remaining).c_str());
  if (tty_) {
    const int width = 24;
    int done = static_cast<int>(width * m.step / std::max<int64_t>(1, total_steps_));
    std::string bar(done, '=');
    bar.resize(width, ' ');
    std::printf("\r[%s] %s", bar.c_str(), line);
  } else {
    std::printf("%s\n", line);
  }
  std::fflush(stdout);
}

void TrainReport::log_eval(const EvalEvent& e) {
  if (!file_) return;
  nlohmann::json j = {{"event", "eval"},
                      {"step", e.step},
                      {"val_loss", e.loss},
                      {"samples", e.samples},
                      {"seconds", e.seconds}};
  char ppl[48] = "";
  if (e.perplexity) {
    j["val_ppl"] = std::exp(e.loss);
    std::snprintf(ppl, sizeof ppl, "  ppl %.2f", std::exp(e.loss));
  }
  append(j.dump() + "\n");
  std::printf("%seval after step %lld: val loss %.4f%s  (%lld samples, %.2f s)\n", tty_ ? "\n" : "",
              static_cast<long long>(e.step), e.loss, ppl, static_cast<long long>(e.samples),
              e.seconds);
  std::fflush(stdout);
}

void TrainReport::log_checkpoint(const CheckpointEvent& e) {
  if (!file_) return;
  std::ostringstream js;
  js.precision(6);
  js << "{\"event\":\"checkpoint\",\"step\":" << e.step
     << ",\"folder\":" << nlohmann::json(e.folder).dump() << ",\"bytes\":" << e.bytes
     << ",\"stall_s\":" << e.stall_seconds << ",\"write_s\":" << e.write_seconds << "}\n";
  append(js.str());
  std::printf("%scheckpoint: step %lld saved to %s (%s; the step waited %.3f s, writing took "
              "%.3f s)\n",
              tty_ ? "\n" : "", static_cast<long long>(e.step), e.folder.c_str(),
              mib_text(static_cast<double>(e.bytes)).c_str(), e.stall_seconds, e.write_seconds);
  std::fflush(stdout);
}

void TrainReport::log_resume(int64_t step, const std::string& folder, double load_seconds) {
  if (!file_) return;
  std::ostringstream js;
  js.precision(6);
  js << "{\"event\":\"resume\",\"step\":" << step << ",\"folder\":" << nlohmann::json(folder).dump()
     << ",\"load_s\":" << load_seconds << "}\n";
  append(js.str());
}

void TrainReport::log_arms(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& arms) {
  if (!file_) return;
  nlohmann::json j;
  j["event"] = "ab_arms";
  for (const auto& [name, overrides] : arms)
    j["arms"].push_back({{"name", name}, {"overrides", overrides}});
  append(j.dump() + "\n");
}

void TrainReport::log_switch(int64_t after_step, const std::string& to, const std::string& label,
                             double seconds) {
  if (!file_) return;
  nlohmann::json j = {
      {"event", "ab_switch"}, {"step", after_step}, {"to", to}, {"seconds", seconds}};
  append(j.dump() + "\n");
  std::printf("%sab: arm %s (%s) takes over after step %lld; the switch took %.3f s\n",
              tty_ ? "\n" : "", to.c_str(), label.c_str(), static_cast<long long>(after_step),
              seconds);
  std::fflush(stdout);
}

void TrainReport::finish_progress() {
  if (file_ && tty_) std::printf("\n");
}

}  // namespace zt::trainer
