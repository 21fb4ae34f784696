#include "train_report.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <sstream>

#include "zt/error.h"

namespace zt::trainer {

namespace {

int64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::string(field).size())) * 1024;
  }
  return 0;
}

std::string eta(double seconds) {
  int s = static_cast<int>(seconds);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

}  // namespace

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
  r.offload_staging = m.offload_staging;
  r.rss = status_kib("VmRSS:");
  r.peak_rss = status_kib("VmHWM:");
  return r;
}

std::vector<RankMemory> gather_memory(Communicator& comm, const RankMemory& mine) {
  const int n = comm.size();
  constexpr int kFields = 10;
  at::Tensor local = at::tensor({mine.params, mine.grads, mine.master, mine.optimizer_states,
                                 mine.gathered_peak, mine.rss, mine.peak_rss, mine.offload_optimizer,
                                 mine.offload_param, mine.offload_staging}, at::kLong)
                         .to(at::kDouble);
  at::Tensor all = at::empty({kFields * n}, at::kDouble);
  comm.all_gather(all, local)->wait();
  std::vector<RankMemory> out(n);
  auto a = all.accessor<double, 1>();
  for (int r = 0; r < n; ++r) {
    auto f = [&](int i) { return static_cast<int64_t>(a[r * kFields + i]); };
    out[r] = {f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9)};
  }
  return out;
}

TrainReport::TrainReport(const std::string& path, int64_t total_steps, int64_t log_every)
    : total_steps_(total_steps), log_every_(log_every) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) {
    throw IoError("cannot write metrics file " + path + ": " + std::strerror(errno) +
                  "; set run.out_dir to a writable folder");
  }
  tty_ = isatty(STDOUT_FILENO) == 1;
}

TrainReport::~TrainReport() {
  if (file_) std::fclose(file_);
}

void TrainReport::log(const StepMetrics& m, const std::vector<RankMemory>& memory,
                      const CommStats& comm) {
  if (!file_) return;
  elapsed_ += m.step_seconds;
  std::ostringstream js;
  js.precision(8);
  js << "{\"step\":" << m.step << ",\"loss\":" << m.loss << ",\"lr\":" << m.lr
     << ",\"loss_scale\":" << m.loss_scale << ",\"grad_norm\":" << m.grad_norm
     << ",\"skipped\":" << (m.skipped ? "true" : "false") << ",\"step_time_s\":" << m.step_seconds
     << ",\"tokens_per_s\":" << m.tokens_per_s << ",\"memory\":[";
  for (size_t r = 0; r < memory.size(); ++r) {
    const auto& x = memory[r];
    js << (r ? "," : "") << "{\"rank\":" << r << ",\"params\":" << x.params << ",\"grads\":" << x.grads
       << ",\"master\":" << x.master << ",\"optimizer_states\":" << x.optimizer_states
       << ",\"gathered_peak\":" << x.gathered_peak << ",\"rss\":" << x.rss << ",\"peak_rss\":" << x.peak_rss
       << ",\"offload_optimizer\":" << x.offload_optimizer << ",\"offload_param\":" << x.offload_param
       << ",\"offload_staging\":" << x.offload_staging << "}";
  }
  js << "],\"comm\":{";
  for (int i = 0; i < kNumCommOps; ++i) {
    js << (i ? "," : "") << "\"" << comm_op_name(static_cast<CommOp>(i)) << "\":{\"calls\":" << comm.ops[i].calls
       << ",\"bytes\":" << comm.ops[i].bytes << "}";
  }
  js << "}}\n";
  std::fputs(js.str().c_str(), file_);
  std::fflush(file_);

  if (m.step % log_every_ != 0 && m.step != total_steps_) return;
  double remaining = m.step > 0 ? elapsed_ / m.step * (total_steps_ - m.step) : 0;
  char line[256];
  std::snprintf(line, sizeof(line), "step %lld/%lld  loss %.4f  lr %.2e  %s%.0f tok/s  ETA %s",
                static_cast<long long>(m.step), static_cast<long long>(total_steps_), m.loss, m.lr,
                m.skipped ? "(skipped: overflow)  " : "", m.tokens_per_s, eta(remaining).c_str());
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

void TrainReport::finish_progress() {
  if (file_ && tty_) std::printf("\n");
}

}  // namespace zt::trainer
