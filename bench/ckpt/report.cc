#include "report.h"

#include <cstdio>

#include "common/bench_util.h"
#include "zt/bytes.h"

namespace zt::bench {

namespace {

std::string offload_text(const CkptConfig& c) {
  if (c.offload_optimizer.empty() && c.offload_param.empty()) return "none";
  std::string s = "optimizer: " + (c.offload_optimizer.empty() ? "-" : c.offload_optimizer);
  if (!c.offload_param.empty()) s += ", params: " + c.offload_param;
  return s;
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

}  // namespace

void print_report(const std::vector<CkptResult>& results) {
  std::printf("\n%-22s %5s %5s %9s %9s %8s %8s %8s %6s %8s %8s %8s %7s\n", "config", "world",
              "stage", "params", "bytes", "save_s", "GB/s", "dd GB/s", "ratio", "stall_s",
              "memcpy_s", "load_s", "stall%");
  for (const CkptResult& r : results) {
    std::printf("%-22s %5d %5d %8.1fM %9s %8.3f %8.2f %8.2f %6.2f %8.4f %8.4f %8.3f %6.1f%%\n",
                r.config.label.c_str(), r.config.world, r.config.stage, r.model_params / 1e6,
                mib_text(static_cast<double>(r.bytes)).c_str(), r.save_s, r.save_gbps(),
                r.disk_write_gbps, ratio(r.save_gbps(), r.disk_write_gbps), r.stall_s, r.memcpy_s(),
                r.load_s, 100 * ratio(r.stall_s, r.save_s));
  }
  std::printf(
      "\nsave_s: a synchronous save (the step waits for the files, fsync and the publish); GB/s: "
      "the whole checkpoint over save_s, next to dd oflag=direct writing as many bytes to the same "
      "folder in this run (target ratio >= 0.8).\nstall_s: how long an asynchronous save held the "
      "step, next to copying one rank's share of the bytes once in memory (memcpy_s) and as a "
      "share of the "
      "synchronous save (target <= 10%%). States in a file tier are streamed to the checkpoint "
      "before the step goes on, so their save cannot be hidden.\n");
  for (const CkptResult& r : results) {
    if (!r.offloaded_to_files()) continue;
    std::printf("%s: peak RSS of rank 0 %s with asynchronous saves, %s without checkpoints "
                "(+%s; offload_nvme's buffer pool is %s)\n",
                r.config.label.c_str(), mib_text(static_cast<double>(r.peak_rss_async)).c_str(),
                mib_text(static_cast<double>(r.peak_rss_no_ckpt)).c_str(),
                mib_text(static_cast<double>(r.peak_rss_async - r.peak_rss_no_ckpt)).c_str(),
                mib_text(static_cast<double>(r.tier_buffer_bytes)).c_str());
  }
}

void write_json(const std::vector<CkptResult>& results, const std::string& path) {
  ResultsFile out(path);
  out << "{\n  \"bench\": \"ckpt\",\n  " << blas_json() << ",\n  \"rows\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const CkptResult& r = results[i];
    out << "    {\"config\": " << json_string(r.config.label)
        << ", \"model_params\": " << r.model_params << ", \"world\": " << r.config.world
        << ", \"stage\": " << r.config.stage
        << ", \"offload\": " << json_string(offload_text(r.config)) << ", \"bytes\": " << r.bytes
        << ", \"rank_bytes\": " << r.rank_bytes << ", \"save_s\": " << json_number(r.save_s)
        << ", \"stall_s\": " << json_number(r.stall_s)
        << ", \"async_write_s\": " << json_number(r.async_write_s)
        << ", \"load_s\": " << json_number(r.load_s)
        << ", \"save_gbps\": " << json_number(r.save_gbps())
        << ", \"disk_write_gbps\": " << json_number(r.disk_write_gbps)
        << ", \"memcpy_gbps\": " << json_number(r.memcpy_gbps)
        << ", \"memcpy_s\": " << json_number(r.memcpy_s());
    if (r.offloaded_to_files()) {
      out << ", \"peak_rss_no_ckpt\": " << r.peak_rss_no_ckpt
          << ", \"peak_rss_async\": " << r.peak_rss_async
          << ", \"tier_buffer_bytes\": " << r.tier_buffer_bytes;
    }
    out << "}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  out.commit();
}

}  // namespace zt::bench
