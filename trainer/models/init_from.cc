// model.init_from: match the model's parameters with a safetensors file's tensors, check them all,
// then load them one at a time.
#include "models/init_from.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "models/hf_names.h"
#include "zt/error.h"
#include "zt/safetensors.h"

namespace zt::models {

namespace {

// One model parameter and the file tensor that holds it.
struct Match {
  at::Tensor param;
  const SafetensorsEntry* entry = nullptr;
  at::ScalarType dtype = at::kFloat;
  bool transpose = false;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// "N tensors: a, b, c, ..." (the first few), to say what a file holds.
std::string holdings(const SafetensorsReader& reader) {
  const auto& entries = reader.entries();
  std::string out = std::to_string(entries.size()) + " tensors";
  for (size_t i = 0; i < entries.size() && i < 4; ++i) {
    out += (i ? ", " : ": ") + entries[i].name;
  }
  return out + (entries.size() > 4 ? ", ..." : "");
}

at::ScalarType dtype_of(const SafetensorsEntry& entry, const std::string& context) {
  if (entry.dtype == "F32") return at::kFloat;
  if (entry.dtype == "BF16") return at::kBFloat16;
  if (entry.dtype == "F16") return at::kHalf;
  throw ConfigError(context + ": tensor '" + entry.name + "' is " + entry.dtype +
                    "; zt loads weights of dtype F32, BF16 or F16: export them in one of those");
}

// The file tensor of model parameter `zt_name`; HF files name GPT tensors with or without the
// "transformer." prefix.
const SafetensorsEntry* find_entry(const SafetensorsReader& reader, const ExportedName& name) {
  if (const SafetensorsEntry* e = reader.find(name.name)) return e;
  const std::string prefix = "transformer.";
  if (name.name.compare(0, prefix.size(), prefix) != 0) return nullptr;
  return reader.find(name.name.substr(prefix.size()));
}

Match match_parameter(const SafetensorsReader& reader, const std::string& kind,
                      const std::string& zt_name, const at::Tensor& param,
                      const std::string& context) {
  const ExportedName name = exported_name(kind, zt_name);
  const SafetensorsEntry* entry = find_entry(reader, name);
  if (!entry) {
    throw ConfigError(context + ": the file has no tensor '" + name.name + "' (model parameter " +
                      zt_name + "); it holds " + holdings(reader) +
                      ". It is a file of another model (check [model]) or of other names "
                      "(write it with `trainer export`)");
  }
  std::vector<int64_t> expected = param.sizes().vec();
  if (name.transpose) std::reverse(expected.begin(), expected.end());
  if (entry->shape != expected) {
    throw ConfigError(context + ": tensor '" + entry->name + "' is " + shape_text(entry->shape) +
                      " in the file but the model's " + zt_name + " needs " + shape_text(expected) +
                      "; the file is of another model size: check [model]");
  }
  return Match{param, entry, dtype_of(*entry, context), name.transpose};
}

// Every file tensor must have found its parameter (or be one HF keeps besides them).
void check_nothing_left(const SafetensorsReader& reader, const std::string& kind,
                        const std::set<const SafetensorsEntry*>& used, const std::string& context) {
  for (const auto& entry : reader.entries()) {
    if (used.count(&entry) || (kind == "gpt" && is_ignored_hf_tensor(entry.name))) continue;
    throw ConfigError(context + ": the file's tensor '" + entry.name +
                      "' is no parameter of the model (" + std::to_string(used.size()) +
                      " matched); the file is of another model size or kind: check [model]");
  }
}

void load_one(const SafetensorsReader& reader, const Match& match) {
  at::Tensor raw = at::empty(match.entry->shape, at::TensorOptions().dtype(match.dtype));
  reader.read(*match.entry, 0, raw.data_ptr(), match.entry->end - match.entry->begin);
  at::Tensor value = raw.to(at::kFloat);
  if (match.transpose) value = value.t();
  at::NoGradGuard no_grad;
  match.param.copy_(value);
}

}  // namespace

void load_weights(Model& model, const std::string& path, const std::string& where) {
  const std::string context = "model.init_from = \"" + path + "\" (" + where + ")";
  std::unique_ptr<SafetensorsReader> reader;
  try {
    reader = std::make_unique<SafetensorsReader>(path);
  } catch (const IoError& e) {
    throw IoError(context + ": " + e.what());
  } catch (const ConfigError& e) {
    throw ConfigError(context + ": " + e.what());
  }
  const std::string& kind = model.shape.kind;
  std::vector<Match> matches;
  std::set<const SafetensorsEntry*> used;
  for (const auto& [zt_name, param] : unique_parameters(model)) {
    matches.push_back(match_parameter(*reader, kind, zt_name, param, context));
    used.insert(matches.back().entry);
  }
  check_nothing_left(*reader, kind, used, context);
  try {
    for (const auto& match : matches) load_one(*reader, match);
  } catch (const IoError& e) {
    throw IoError(context + ": " + e.what());
  }
}

void apply_init_from(Model& model, const Config& config) {
  const Options& options = config.section("model");
  const std::string& path = options.get_string("init_from");
  if (path.empty()) return;
  load_weights(model, path, options.where("init_from").str());
}

}  // namespace zt::models
