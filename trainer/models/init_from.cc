// model.init_from: match the model's parameters with a safetensors file's tensors, check them all,
// then load them one at a time.
#include "models/init_from.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/StringUtil.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "models/hf_names.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/rank_agreement.h"
#include "zt/host/safetensors.h"

namespace zt::models {

namespace {

// One model parameter and the file tensor that holds it.
struct Match {
  std::string zt_name;
  const SafetensorsEntry* entry = nullptr;
  at::ScalarType dtype = at::kFloat;
  bool transpose = false;
};

// The file, open, with every model parameter matched to its tensor.
struct CheckedFile {
  std::string context;  // "model.init_from = ... (where)", for messages
  std::unique_ptr<SafetensorsReader> reader;
  std::vector<Match> matches;  // in the order of the parameters
};

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

// The [model] key behind a GPT tensor's first differing size, for the refusal: a preset looks
// right in [model] while byte-level text has set the vocabulary to 256 ("" when none is clear).
std::string size_key_of(const std::string& kind, const std::string& zt_name,
                        const std::vector<int64_t>& file, const std::vector<int64_t>& want) {
  if (kind != "gpt" || file.size() != want.size() || file.empty()) return "";
  const bool first = file[0] != want[0];
  std::string key;
  if (zt_name == "wte.weight" && first) {
    key = "model.vocab (byte-level text, data.kind = \"text\", makes it 256 unless set)";
  } else if (zt_name == "wpe.weight" && first) {
    key = "model.seq_len";
  } else {
    key = "model.d_model";
  }
  return ", " + key + " differs from the file's";
}

Match match_parameter(const SafetensorsReader& reader, const std::string& kind,
                      const std::string& zt_name, std::vector<int64_t> expected,
                      const std::string& context) {
  const ExportedName name = exported_name(kind, zt_name);
  const SafetensorsEntry* entry = find_entry(reader, name);
  if (!entry) {
    throw ConfigError(context + ": the file has no tensor '" + name.name + "' (model parameter " +
                      zt_name + "); it holds " + holdings(reader) +
                      ". It is a file of another model (check [model]) or of other names "
                      "(write it with `trainer export`)");
  }
  if (name.transpose) std::reverse(expected.begin(), expected.end());
  if (entry->shape != expected) {
    throw ConfigError(context + ": tensor '" + entry->name + "' is " +
                      c10::str(at::IntArrayRef(entry->shape)) + " in the file but the model's " +
                      zt_name + " needs " + c10::str(at::IntArrayRef(expected)) +
                      "; the file is of another model size: check [model]" +
                      size_key_of(kind, zt_name, entry->shape, expected));
  }
  return Match{zt_name, entry, dtype_of(*entry, context), name.transpose};
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

// zt's GPT ties its LM head to wte, as GPT-2 does. A file whose lm_head.weight differs from its
// wte (a model saved with tie_word_embeddings = False) would load, and give other logits than
// the model it came from.
void check_tied_head(const CheckedFile& file);

// A GPT file trainer export wrote records its attention heads (zt.n_head): the one size the
// shapes cannot tell, so another one loaded and computed another function without a word.
void check_heads(const SafetensorsReader& reader, int64_t n_head, const std::string& context) {
  const auto it = reader.metadata().find("zt.n_head");
  if (n_head <= 0 || it == reader.metadata().end() || it->second == std::to_string(n_head)) return;
  throw ConfigError(context + ": the file holds a GPT of " + it->second +
                    " attention heads (its zt.n_head, as trainer export records it), but this "
                    "model has " +
                    std::to_string(n_head) +
                    " (model.n_head, or its preset's): the same tensors would compute another "
                    "function; set model.n_head = " +
                    it->second);
}

// A Hugging Face folder's config.json beside the file (what save_pretrained and the hub give,
// and trainer export writes beside a model.safetensors): the GPT2Config settings the tensors'
// shapes cannot tell, checked against zt's GPT. Without one nothing is checked here.
void check_hf_config(const std::string& path, int64_t n_head, const std::string& context) {
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "config.json";
  std::ifstream in(config);
  if (!in) return;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const std::string named = context + ": " + config.string() + " beside the file ";
  if (!j.is_object()) {
    throw ConfigError(named + "is no JSON object: fix it, or move it away if it belongs to "
                              "another model");
  }
  auto refuse = [&](const std::string& what) {
    throw ConfigError(named + what +
                      ": the same tensors would compute another function in zt's GPT (GPT-2's "
                      "architecture: tanh GELU, LayerNorm eps 1e-5, attention scaled by "
                      "1/sqrt(head size))");
  };
  if (const auto h = j.find("n_head");
      h != j.end() && h->is_number_integer() && n_head > 0 && h->get<int64_t>() != n_head) {
    throw ConfigError(named + "says n_head = " + std::to_string(h->get<int64_t>()) +
                      ", but this model has " + std::to_string(n_head) +
                      " (model.n_head, or its preset's): the same tensors would compute another "
                      "function; set model.n_head = " +
                      std::to_string(h->get<int64_t>()));
  }
  if (const auto a = j.find("activation_function");
      a != j.end() && a->is_string() && *a != "gelu_new" && *a != "gelu_pytorch_tanh") {
    refuse("says activation_function = \"" + a->get<std::string>() + "\"");
  }
  if (const auto e = j.find("layer_norm_epsilon");
      e != j.end() && e->is_number() && std::abs(e->get<double>() - 1e-5) > 1e-12) {
    refuse("says layer_norm_epsilon = " + e->dump());
  }
  if (j.value("scale_attn_by_inverse_layer_idx", false)) {
    refuse("says scale_attn_by_inverse_layer_idx = true");
  }
  if (!j.value("scale_attn_weights", true)) refuse("says scale_attn_weights = false");
}

// Opens the file and matches every parameter to a tensor of it, checking them all. `n_head`: a
// GPT's attention heads, checked against the file's record of them (0: none to check).
CheckedFile check_file(const std::string& path, const std::string& where, const std::string& kind,
                       const std::vector<ParamDecl>& params, int64_t n_head) {
  CheckedFile file;
  file.context = "model.init_from = \"" + path + "\" (" + where + ")";
  try {
    file.reader = std::make_unique<SafetensorsReader>(path);
  } catch (const IoError& e) {
    throw IoError(file.context + ": " + e.what());
  } catch (const ConfigError& e) {
    throw ConfigError(file.context + ": " + e.what());
  }
  std::set<const SafetensorsEntry*> used;
  for (const ParamDecl& p : params) {
    file.matches.push_back(match_parameter(*file.reader, kind, p.name, p.shape, file.context));
    used.insert(file.matches.back().entry);
  }
  check_nothing_left(*file.reader, kind, used, file.context);
  if (kind == "gpt") check_tied_head(file);
  if (kind == "gpt") check_heads(*file.reader, n_head, file.context);
  if (kind == "gpt") check_hf_config(path, n_head, file.context);
  return file;
}

// The matched tensor in fp32 and in the model's layout (one tensor in memory at a time).
at::Tensor read_value(const CheckedFile& file, const Match& match) {
  at::Tensor raw = at::empty(match.entry->shape, at::TensorOptions().dtype(match.dtype));
  try {
    file.reader->read(*match.entry, 0, raw.data_ptr(), match.entry->end - match.entry->begin);
  } catch (const IoError& e) {
    throw IoError(file.context + ": " + e.what());
  }
  at::Tensor value = raw.to(at::kFloat);
  return match.transpose ? value.t() : value;
}

// Whether two tensors of the file hold the same values, compared a block of rows at a time:
// every rank checks, and two whole [vocab, d] tensors in fp32 (640 MB for gpt2-xl) were more
// than the one tensor at a time the loading promises.
bool same_values(const CheckedFile& file, const Match& a, const Match& b) {
  if (a.entry->shape != b.entry->shape) return false;
  const std::vector<int64_t>& shape = a.entry->shape;
  const int64_t rows = shape.empty() ? 1 : shape[0];
  int64_t row_elements = 1;
  for (size_t i = 1; i < shape.size(); ++i) row_elements *= shape[i];
  const int64_t block = std::max<int64_t>(1,
                                          (int64_t{4} << 20) / std::max<int64_t>(1, row_elements));
  for (int64_t row = 0; row < rows; row += block) {
    const int64_t n = std::min(block, rows - row);
    at::Tensor values[2];
    int k = 0;
    for (const Match* m : {&a, &b}) {
      const int64_t size = static_cast<int64_t>(c10::elementSize(m->dtype));
      at::Tensor raw = at::empty({n * row_elements}, at::TensorOptions().dtype(m->dtype));
      try {
        file.reader->read(*m->entry, row * row_elements * size, raw.data_ptr(),
                          n * row_elements * size);
      } catch (const IoError& e) {
        throw IoError(file.context + ": " + e.what());
      }
      values[k++] = raw.to(at::kFloat);
    }
    if (!at::equal(values[0], values[1])) return false;
  }
  return true;
}

void check_tied_head(const CheckedFile& file) {
  const SafetensorsEntry* head = file.reader->find("lm_head.weight");
  const auto wte = std::find_if(file.matches.begin(), file.matches.end(),
                                [](const Match& m) { return m.zt_name == "wte.weight"; });
  if (!head || wte == file.matches.end()) return;
  const Match as_head{"lm_head.weight", head, dtype_of(*head, file.context), false};
  if (same_values(file, as_head, *wte)) return;
  throw ConfigError(file.context + ": the file's lm_head.weight differs from its " +
                    wte->entry->name +
                    " (a model saved with tie_word_embeddings = False); zt's GPT ties its LM "
                    "head to wte, as GPT-2 does, so it would compute other logits than the "
                    "file's model: start from a tied checkpoint");
}

}  // namespace

void load_weights(Model& model, const std::string& path, const std::string& where) {
  const auto params = unique_parameters(model);
  std::vector<ParamDecl> shapes;
  for (const auto& [name, t] : params) shapes.push_back({name, t.sizes().vec(), {}});
  const CheckedFile file = check_file(path, where, model.shape.kind, shapes, model.shape.n_head);
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].second.copy_(read_value(file, file.matches[i]));
  }
}

void apply_init_from(Model& model, const trainer::ModelSettings& settings) {
  if (settings.init_from.empty()) return;
  load_weights(model, settings.init_from, settings.places.where("model.init_from"));
}

std::vector<ParamDecl> declared_parameters(const ModelSource& source) {
  std::vector<ParamDecl> out;
  std::set<std::string> seen;
  for (int64_t u = 0; u < source.unit_count(); ++u) {
    for (ParamDecl& d : source.declare(u)) {
      if (seen.insert(d.name).second) out.push_back(std::move(d));
    }
  }
  return out;
}

void load_weights(Engine& engine, Communicator& comm, const std::string& kind,
                  const std::vector<ParamDecl>& params, const std::string& path,
                  const std::string& where, int rank, int64_t n_head) {
  // Every rank checks the file, and they agree on the outcome before the first gather: a rank
  // that cannot read it (the file on one host's local disk) threw alone, while the others
  // waited in that gather until launch.timeout_s and reported a comm error.
  std::optional<CheckedFile> file;
  std::exception_ptr mine;
  try {
    file.emplace(check_file(path, where, kind, params, n_head));
  } catch (...) {
    mine = std::current_exception();
  }
  const int failed = highest_failed_rank(comm, mine != nullptr);
  if (mine) std::rethrow_exception(mine);
  if (failed >= 0) {
    throw IoError("model.init_from = " + path + " (" + where + "): rank " + std::to_string(failed) +
                  " cannot use the file (its own error says why); every rank reads it: put it "
                  "where every host sees the same file");
  }
  for (const Match& match : file->matches) {
    engine.with_gathered_parameters({match.zt_name}, 0,
                                    [&](std::vector<std::pair<std::string, at::Tensor>>& gathered) {
      if (rank == 0) gathered[0].second.copy_(read_value(*file, match));
    });
  }
}

void apply_init_from(Engine& engine, Communicator& comm, const std::vector<ParamDecl>& params,
                     const trainer::ModelSettings& settings, int rank) {
  if (settings.init_from.empty()) return;
  load_weights(engine, comm, settings.kind, params, settings.init_from,
               settings.places.where("model.init_from"), rank,
               settings.kind == "gpt" ? gpt_heads(settings.preset, settings.n_head) : 0);
}

}  // namespace zt::models
