#include "common/child_process.h"

#include <deque>
#include <fstream>

#include "zt/host/child_process.h"

namespace zt::bench {

const std::vector<std::string>& bench_gpt_overrides() {
  // ~10.8M parameters (6 x 12 x 384^2 in the blocks): about 0.6 s a step for 2 ranks on two
  // cores.
  static const std::vector<std::string> kOverrides = {"model.n_layer=6", "model.d_model=384",
                                                      "model.n_head=6", "model.seq_len=128",
                                                      "model.vocab=256"};
  return kOverrides;
}

std::vector<std::string> bench_gpt_command(const std::string& trainer, const std::string& root,
                                           const std::string& out_dir, int64_t steps,
                                           const std::vector<std::string>& more) {
  std::vector<std::string> argv = {trainer, "--config", root + "/configs/zero3.toml"};
  std::vector<std::string> sets = bench_gpt_overrides();
  sets.insert(sets.end(), {"run.out_dir=" + out_dir, "data.path=" + root + "/README.md",
                           "run.steps=" + std::to_string(steps), "run.report=false"});
  sets.insert(sets.end(), more.begin(), more.end());
  for (const std::string& kv : sets) argv.insert(argv.end(), {"--set", kv});
  return argv;
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  return zt::run_logged(argv, log_path);
}

std::string tail_lines(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "  | " + l + "\n";
  return out;
}

}  // namespace zt::bench
