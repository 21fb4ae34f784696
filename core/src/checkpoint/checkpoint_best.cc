#include "checkpoint/checkpoint_best.h"

#include <filesystem>

#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_manifest.h"
#include "util/posix_file.h"
#include "zt/error.h"

namespace fs = std::filesystem;

namespace zt::ckpt {

std::optional<double> recorded_metric(const std::string& folder, const std::string& name) {
  const std::string path = (fs::path(folder) / kManifestName).string();
  try {
    const Manifest m = manifest_from_json(read_whole_file(path), path);
    auto it = m.meta.metrics.find(name);
    if (it == m.meta.metrics.end()) return std::nullopt;
    return it->second;
  } catch (const Error&) {
    // A manifest that does not read is no candidate; loading it says what is wrong.
    return std::nullopt;
  }
}

std::string update_best(const std::string& dir, const std::string& metric, int64_t published) {
  std::string best;
  double lowest = 0;
  // Every complete checkpoint of this run's past, not only the one just published: a resumed
  // run may have replaced the folder dir/best named.
  for (const auto& [step, folder] : complete_checkpoints(dir)) {
    if (step > published) continue;
    const std::optional<double> value = recorded_metric(folder, metric);
    if (value && (best.empty() || *value < lowest)) {
      best = folder;
      lowest = *value;
    }
  }
  const std::string named = folder_named_by(dir, kBestName);
  if (best.empty()) {
    // None of this run's steps records the metric yet: a `best` naming a newer run's step goes,
    // or it would be loaded as this run's best and spare that folder.
    if (!named.empty() && parse_step_folder(fs::path(named).filename().string()) > published) {
      std::error_code ec;
      fs::remove(fs::path(dir) / kBestName, ec);
    }
    return best;
  }
  const std::string name = fs::path(best).filename().string();
  if (named.empty() || fs::path(named).filename() != name) {
    replace_file_atomically((fs::path(dir) / kBestName).string(), name + "\n");
  }
  return best;
}

}  // namespace zt::ckpt
