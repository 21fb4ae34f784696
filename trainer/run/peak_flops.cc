#include "run/peak_flops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zt/host/blas.h"
#include "zt/host/rank_agreement.h"
#include "zt/host/rendezvous.h"

namespace zt::trainer {

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown cpu";
}

std::string cache_file() {
  if (const char* dir = std::getenv("ZT_CACHE_DIR"); dir && *dir)
    return std::string(dir) + "/peak-flops.json";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/zt/peak-flops.json";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/zt/peak-flops.json";
  return "";
}

nlohmann::json read_cache(const std::string& file) {
  std::ifstream in(file);
  nlohmann::json j = nlohmann::json::object();
  try {
    if (in) in >> j;
  } catch (const std::exception&) {
    j = nlohmann::json::object();  // a damaged cache is measured again and rewritten
  }
  return j.is_object() ? j : nlohmann::json::object();
}

// Rank 0 of each host writes (a temporary file renamed over the old one).
void write_cache(const std::string& file, const std::string& key, double flops) {
  nlohmann::json j = read_cache(file);
  j[key] = flops;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  const std::string tmp = file + ".tmp" + std::to_string(getpid());
  std::ofstream out(tmp);
  out << j.dump(1) << "\n";
  if (out.flush()) std::filesystem::rename(tmp, file, ec);
  else std::filesystem::remove(tmp, ec);
}

// Best FLOP/s of a few rounds of n x n matrix products.
double probe(at::ScalarType dtype) {
  constexpr int64_t n = 1024;
  const at::Tensor a = at::randn({n, n}).to(dtype), b = at::randn({n, n}).to(dtype);
  at::Tensor c = at::mm(a, b);  // warm-up: threads started, kernels chosen
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    int reps = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double seconds = 0;
    while (seconds < 0.1) {
      at::mm_out(c, a, b);
      ++reps;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    best = std::max(best, 2.0 * n * n * n * reps / seconds);
  }
  return best;
}

}  // namespace

PeakFlops peak_flops(Communicator& comm, at::ScalarType dtype) {
  const int local_ranks = std::max(1, discover_rank_env().local_world);
  const int threads = at::get_num_threads();
  const std::string what = std::string(dtype == at::kFloat ? "sgemm fp32" : "gemm ") +
                           (dtype == at::kFloat ? "" : c10::toString(dtype)) + " 1024^3, " +
                           std::to_string(threads) + " thread(s) x " + std::to_string(local_ranks) +
                           " rank(s) per host";
  const std::string key = cpu_model() + " | " + std::to_string(threads) + " threads | " +
                          std::to_string(local_ranks) + " local ranks | " + c10::toString(dtype) +
                          " | " + probe_blas().core;
  const std::string file = cache_file();
  double cached = 0;
  if (!file.empty()) {
    const nlohmann::json j = read_cache(file);
    if (j.contains(key) && j[key].is_number()) cached = j[key].get<double>();
  }
  const bool missing = max_over_ranks(comm, cached > 0 ? 0 : 1) > 0;
  const char* local_rank = std::getenv("LOCAL_RANK");
  const bool writes = !file.empty() && (!local_rank || std::atoi(local_rank) == 0);
  if (!missing) return {cached, what + ", cached in " + file, file, key, writes};
  comm.barrier()->wait();
  const double measured = probe(dtype);
  if (writes) write_cache(file, key, measured);
  return {measured, what + ", measured", file, key, writes};
}

bool raise_peak(PeakFlops& peak, double reached) {
  if (!(reached > peak.per_rank) || peak.per_rank <= 0) return false;
  constexpr const char* kRaised = ", raised to a step's rate (the probe shared the cores)";
  if (peak.how.find(kRaised) == std::string::npos) peak.how += kRaised;
  peak.per_rank = reached;
  peak.raised = true;
  return true;
}

void keep_raised_peak(const PeakFlops& peak) {
  if (peak.raised && peak.writes_cache) write_cache(peak.cache_file, peak.cache_key, peak.per_rank);
}

}  // namespace zt::trainer
