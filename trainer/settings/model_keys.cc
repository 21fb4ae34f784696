#include "settings/model_keys.h"

#include <map>

namespace zt::trainer {

namespace {

// The kinds that read each [model] key; the keys not listed (kind, activation_checkpointing,
// init_from) are read by all. A model plugin reads its own table, [plugin.<id>].
const std::map<std::string, std::vector<std::string>>& key_kinds() {
  static const std::map<std::string, std::vector<std::string>> k = {
      {"path", {"torchscript"}},
      {"units", {"torchscript"}},
      {"loss", {"torchscript"}},
      {"input_shape", {"torchscript"}},
      {"target_shape", {"torchscript"}},
      {"preset", {"gpt"}},
      {"n_layer", {"gpt"}},
      {"n_head", {"gpt"}},
      {"d_model", {"gpt"}},
      {"seq_len", {"gpt", "torchscript"}},
      {"vocab", {"gpt", "torchscript"}},
      {"width", {"mlp"}},
      {"depth", {"mlp"}},
      {"activation", {"mlp"}}};
  return k;
}

std::string kinds_text(const std::vector<std::string>& kinds) {
  std::string out = kinds.size() == 1 ? "model kind " : "model kinds ";
  for (size_t i = 0; i < kinds.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == kinds.size() ? " and " : ", ") + ("'" + kinds[i] + "'");
  }
  return out;
}

}  // namespace

std::vector<std::string> unused_model_keys(const Config& config) {
  const Options& model = config.section("model");
  const std::string& kind = model.get_string("kind");
  const std::string kind_text = model.is_set("kind")
                                    ? "model.kind = \"" + kind + "\" at " +
                                          model.where("kind").str()
                                    : "model.kind is not set, so it is \"" + kind + "\"";
  // --set model.kind=mlp over a GPT config (as tests, benchmarks and quick trials do) leaves the
  // file's GPT keys unused on purpose.
  const bool kind_from_set = model.is_set("kind") && model.where("kind").from_override();
  std::vector<std::string> lines;
  for (const auto& [key, kinds] : key_kinds()) {
    if (!model.is_set(key) || (kind_from_set && !model.where(key).from_override())) continue;
    bool read = false;
    for (const std::string& k : kinds) read = read || k == kind;
    if (read) continue;
    lines.push_back(model.where(key).str() + ": model." + key + " is a key of " +
                    kinds_text(kinds) + ", and this job's model is '" + kind + "' (" + kind_text +
                    "), which does not read it: remove model." + key + ", or set model.kind to " +
                    (kinds.size() == 1 ? "\"" + kinds[0] + "\"" : "one of them"));
  }
  return lines;
}

}  // namespace zt::trainer
