#include "common/child_process.h"

#include <deque>
#include <fstream>

#include "zt/child_process.h"

namespace zt::bench {

const std::vector<std::string>& bench_gpt_overrides() {
  // ~10.8M parameters (6 x 12 x 384^2 in the blocks): about 0.6 s a step for 2 ranks on two
  // cores.
  static const std::vector<std::string> kOverrides = {"model.n_layer=6", "model.d_model=384",
                                                      "model.n_head=6", "model.seq_len=128",
                                                      "model.vocab=256"};
  return kOverrides;
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
