// zt GPT tensor names <-> Hugging Face GPT-2 names, with the Conv1D transposes.
#include "models/hf_names.h"

#include <algorithm>
#include <cctype>

#include "zt/error.h"

namespace zt::models {

namespace {

constexpr const char* kHfPrefix = "transformer.";

// A block's submodules: zt's name, HF's name, whether HF computes it with Conv1D.
struct BlockModule {
  const char* zt;
  const char* hf;
  bool conv1d;
};
constexpr BlockModule kBlockModules[] = {
    {"ln1", "ln_1", false}, {"attn.qkv", "attn.c_attn", true}, {"attn.proj", "attn.c_proj", true},
    {"ln2", "ln_2", false}, {"mlp.fc", "mlp.c_fc", true},      {"mlp.proj", "mlp.c_proj", true},
};

// Tensors outside the blocks, named alike in both (HF adds the prefix).
constexpr const char* kTopLevel[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string without_hf_prefix(const std::string& name) {
  const std::string prefix = kHfPrefix;
  return starts_with(name, prefix) ? name.substr(prefix.size()) : name;
}

bool is_top_level(const std::string& name) {
  return std::find(std::begin(kTopLevel), std::end(kTopLevel), name) != std::end(kTopLevel);
}

// Splits "<head><digits>.<rest>" into digits and rest; false when `name` is not of that form.
bool split_indexed(const std::string& name, const std::string& head, std::string& index,
                   std::string& rest) {
  if (!starts_with(name, head)) return false;
  const size_t dot = name.find('.', head.size());
  if (dot == std::string::npos || dot == head.size()) return false;
  index = name.substr(head.size(), dot - head.size());
  if (!std::all_of(index.begin(), index.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return false;
  }
  rest = name.substr(dot + 1);
  return true;
}

// Maps "<module>.<weight|bias>" of one block from one side's names to the other's.
std::optional<ExportedName> map_block_tensor(const std::string& rest, bool from_zt) {
  for (const auto& m : kBlockModules) {
    const std::string from = from_zt ? m.zt : m.hf, to = from_zt ? m.hf : m.zt;
    for (const char* suffix : {"weight", "bias"}) {
      if (rest == from + "." + suffix) {
        return ExportedName{to + "." + suffix, m.conv1d && std::string(suffix) == "weight"};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::string model_kind_of(const std::vector<std::string>& zt_names) {
  if (std::find(zt_names.begin(), zt_names.end(), "wte.weight") == zt_names.end()) return "mlp";
  // A TorchScript model may have a "wte" of its own: GPT only when every name is zt's GPT's.
  for (const std::string& name : zt_names) {
    if (is_top_level(name)) continue;
    std::string index, rest;
    if (split_indexed(name, "block", index, rest) && map_block_tensor(rest, true)) continue;
    return "mlp";
  }
  return "gpt";
}

ExportedName exported_name(const std::string& model_kind, const std::string& zt_name) {
  if (model_kind != "gpt") return {zt_name, false};
  if (is_top_level(zt_name)) return {kHfPrefix + zt_name, false};
  std::string index, rest;
  if (split_indexed(zt_name, "block", index, rest)) {
    if (auto mapped = map_block_tensor(rest, true)) {
      return {kHfPrefix + std::string("h.") + index + "." + mapped->name, mapped->transpose};
    }
  }
  throw InternalError("GPT tensor '" + zt_name +
                      "' has no Hugging Face GPT-2 name in trainer/models/hf_names.cc; a model "
                      "tensor was added or renamed without its mapping");
}

std::optional<ExportedName> zt_name_of(const std::string& model_kind,
                                       const std::string& file_name) {
  if (model_kind != "gpt") return ExportedName{file_name, false};
  const std::string name = without_hf_prefix(file_name);
  if (is_top_level(name)) return ExportedName{name, false};
  std::string index, rest;
  if (!split_indexed(name, "h.", index, rest)) return std::nullopt;
  auto mapped = map_block_tensor(rest, false);
  if (!mapped) return std::nullopt;
  return ExportedName{"block" + index + "." + mapped->name, mapped->transpose};
}

bool is_ignored_hf_tensor(const std::string& file_name) {
  const std::string name = without_hf_prefix(file_name);
  if (name == "lm_head.weight") return true;
  std::string index, rest;
  return split_indexed(name, "h.", index, rest) &&
         (rest == "attn.bias" || rest == "attn.masked_bias");
}

}  // namespace zt::models
