// trainer export: checkpoint "param" tensors -> one safetensors file, one tensor at a time.
#include "app/export_command.h"

#include <unistd.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "models/hf_names.h"
#include "models/model.h"
#include "report/report_file.h"
#include "run/checkpointing.h"
#include "run/stop_signals.h"
#include "settings/job_config.h"
#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/safetensors.h"

namespace zt::trainer {

namespace {

struct ExportDtype {
  const char* cli;   // --dtype
  const char* file;  // safetensors dtype
  at::ScalarType scalar;
};

const ExportDtype& export_dtype(const std::string& cli) {
  static const ExportDtype kDtypes[] = {
      {"fp32", "F32", at::kFloat}, {"bf16", "BF16", at::kBFloat16}, {"fp16", "F16", at::kHalf}};
  for (const auto& d : kDtypes) {
    if (cli == d.cli) return d;
  }
  // parse_cli accepts only these three.
  throw InternalError("trainer export: --dtype " + cli + " has no safetensors dtype");
}

// One checkpoint tensor and how the file holds it.
struct Planned {
  const CheckpointTensor* tensor;
  models::ExportedName name;
  std::vector<int64_t> file_shape;
};

// A GPT's GPT2Config sizes (all 0 when unknown).
struct GptSizes {
  int64_t vocab = 0, positions = 0, width = 0, layers = 0, heads = 0;
};

struct ExportPlan {
  std::string kind;  // "gpt" | "mlp"
  std::vector<Planned> tensors;
  int64_t n_head = 0;       // a GPT's attention heads, from the checkpoint's config (0: unknown)
  GptSizes gpt;             // gpt_sizes_of()
  std::string gpt2_config;  // gpt2_config_of(): recorded in the file and printed
};

// The GPT2Config sizes a GPT's file fits, from its tensors' shapes and the heads; all 0 for
// another model, or without the heads (GPT-2's other defaults, tanh GELU and LayerNorm eps 1e-5,
// are zt's).
GptSizes gpt_sizes_of(const ExportPlan& plan) {
  if (plan.kind != "gpt" || plan.n_head <= 0) return {};
  GptSizes g;
  for (const Planned& p : plan.tensors) {
    const std::string& name = p.name.name;
    if (name == "transformer.wte.weight") {
      g.vocab = p.file_shape.at(0);
      g.width = p.file_shape.at(1);
    } else if (name == "transformer.wpe.weight") {
      g.positions = p.file_shape.at(0);
    } else if (name.rfind("transformer.h.", 0) == 0) {
      g.layers = std::max<int64_t>(g.layers, 1 + std::stoll(name.substr(14)));
    }
  }
  if (g.vocab == 0 || g.positions == 0) return {};
  g.heads = plan.n_head;
  return g;
}

// What a reader needs besides the file to build GPT2LMHeadModel: "" without sizes.
std::string gpt2_config_of(const GptSizes& g) {
  if (g.heads == 0) return "";
  return "GPT2Config(vocab_size=" + std::to_string(g.vocab) +
         ", n_positions=" + std::to_string(g.positions) + ", n_embd=" + std::to_string(g.width) +
         ", n_layer=" + std::to_string(g.layers) + ", n_head=" + std::to_string(g.heads) + ")";
}

// Hugging Face's config.json of the same GPT2Config, so that GPT2LMHeadModel.from_pretrained of
// the folder loads the pair: tanh GELU ("gelu_new"), LayerNorm eps 1e-5, the MLP 4 x n_embd wide,
// the head tied to wte, and no dropout (zt trains without it).
std::string hf_config_json(const GptSizes& g, const ExportDtype& dtype) {
  const char* torch_dtype = dtype.scalar == at::kBFloat16 ? "bfloat16"
                            : dtype.scalar == at::kHalf   ? "float16"
                                                          : "float32";
  const nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                            {"model_type", "gpt2"},
                            {"vocab_size", g.vocab},
                            {"n_positions", g.positions},
                            {"n_ctx", g.positions},
                            {"n_embd", g.width},
                            {"n_layer", g.layers},
                            {"n_head", g.heads},
                            {"n_inner", nullptr},
                            {"activation_function", "gelu_new"},
                            {"layer_norm_epsilon", 1e-5},
                            {"resid_pdrop", 0.0},
                            {"embd_pdrop", 0.0},
                            {"attn_pdrop", 0.0},
                            {"initializer_range", 0.02},
                            {"tie_word_embeddings", true},
                            {"torch_dtype", torch_dtype}};
  return j.dump(2) + "\n";
}

// What a manifest (data from wherever the checkpoint came from) must hold before a tensor is
// allocated and placed: its values saved whole (which bounds its size by the rank files'), and
// for a GPT the 2-D matrices and the layer number its Hugging Face name and config are made of.
void check_exportable(const CheckpointReader& reader, const CheckpointTensor& t,
                      const std::string& kind) {
  const std::string where = reader.folder() + "/manifest.json: tensor '" + t.name + "'";
  const std::string way_out = "; the manifest is damaged: export an older checkpoint";
  const int64_t n = t.numel();
  const auto saved = reader.saved_ranges(t.name, "param", 0, n);
  if (n > 0 && (saved.size() != 1 || saved[0] != std::pair<int64_t, int64_t>{0, n})) {
    throw ConfigError(where + " has " + std::to_string(n) +
                      " values, and its saved pieces do not hold them all" + way_out);
  }
  if (kind != "gpt") return;
  const models::ExportedName name = models::exported_name(kind, t.name);
  const bool matrix = name.transpose || name.name == "transformer.wte.weight" ||
                      name.name == "transformer.wpe.weight";
  if (matrix && t.shape.size() != 2) {
    throw ConfigError(where + " has " + std::to_string(t.shape.size()) + " dimensions; a GPT's " +
                      name.name + " is a matrix" + way_out);
  }
  const std::string layers = "transformer.h.";
  if (name.name.rfind(layers, 0) == 0) {
    const std::string digits = name.name.substr(layers.size(),
                                                name.name.find('.', layers.size()) - layers.size());
    if (digits.empty() || digits.size() > 6 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw ConfigError(where + " is in layer '" + digits + "', not a layer number below 1000000" +
                        way_out);
    }
  }
}

ExportPlan plan_export(const CheckpointReader& reader) {
  std::vector<std::string> names;
  for (const auto& t : reader.tensors()) names.push_back(t.name);
  ExportPlan plan{models::model_kind_of(names), {}, 0, {}, ""};
  // A GPT's heads, the one size its tensors cannot tell: recorded in the file (zt.n_head) for
  // model.init_from to check and for a reader building GPT2Config; 0 without a config (a
  // Python engine's checkpoint saved without one).
  if (plan.kind == "gpt") plan.n_head = models::gpt_heads_of_config(reader.meta().config_toml);
  for (const auto& t : reader.tensors()) {
    check_exportable(reader, t, plan.kind);
    Planned p{&t, models::exported_name(plan.kind, t.name), t.shape};
    if (p.name.transpose) std::swap(p.file_shape[0], p.file_shape[1]);
    plan.tensors.push_back(std::move(p));
  }
  plan.gpt = gpt_sizes_of(plan);
  plan.gpt2_config = gpt2_config_of(plan.gpt);
  return plan;
}

// Removes a half-written file unless the export got to publish it.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) { watched(path_); }
  ~TempFileGuard() {
    watched("");
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() {
    watched("");
    path_.clear();
  }

 private:
  // A checkpoint read past its deadline ends the process without unwinding (FileIoDeadline):
  // its last words remove the file this guard would have, GBs of a model cut short. So does a
  // second Ctrl-C (stop_signals.h).
  static void watched(const std::string& path) {
    remove_on_hard_stop(path);
    static std::mutex mu;
    static std::string unfinished;
    static std::once_flag registered;
    std::call_once(registered, [] {
      add_file_io_last_words([]() -> std::string {
        const std::lock_guard<std::mutex> lock(mu);
        if (unfinished.empty()) return "";
        std::error_code ec;
        std::filesystem::remove(unfinished, ec);
        return ec ? "" : "ending on a stuck checkpoint read; removed the unfinished " + unfinished;
      });
    });
    const std::lock_guard<std::mutex> lock(mu);
    unfinished = path;
  }

  std::string path_;
};

// Runs a step that writes --out; its IoError names --out first, whatever file the step used.
template <typename Step>
void writing_out(const std::string& out, Step&& step) {
  try {
    step();
  } catch (const IoError& e) {
    throw IoError("trainer export --out " + out + ": " + e.what());
  }
}

// The tensor's values as the file holds them: read whole from the checkpoint, transposed for
// HF's Conv1D, converted to the export dtype.
at::Tensor file_value(const CheckpointReader& reader, const Planned& p, at::ScalarType dtype) {
  at::Tensor value = at::empty(p.tensor->shape, at::kFloat);
  reader.read(p.tensor->name, "param", 0, p.tensor->numel(), value.data_ptr<float>());
  if (p.name.transpose) value = value.t();
  at::Tensor converted = value.to(dtype).contiguous();
  // fp16 tops out at 65504: a larger weight would become inf in the file without a word.
  if (dtype == at::kHalf && !converted.isfinite().all().item<bool>() &&
      value.isfinite().all().item<bool>()) {
    throw NumericError("trainer export: tensor " + p.tensor->name +
                       " has values beyond fp16's range (65504); export with --dtype bf16 or "
                       "fp32");
  }
  return converted;
}

// Writes every planned tensor to `out`.tmp-<pid>, runs `before_publish` once the file is
// complete (no checkpoint read left), then renames it to `out`; returns the file's bytes.
int64_t write_file(const CheckpointReader& reader, const ExportPlan& plan, const ExportDtype& dtype,
                   const std::string& out, const std::function<void()>& before_publish) {
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");
  if (plan.n_head > 0) writer.set_metadata("zt.n_head", std::to_string(plan.n_head));
  if (!plan.gpt2_config.empty()) writer.set_metadata("zt.gpt2_config", plan.gpt2_config);
  for (const auto& p : plan.tensors) writer.add(p.name.name, dtype.file, p.file_shape);
  // A name of this process's own: two exports to one --out (a sweep's script run twice) wrote
  // one out.tmp together, and the mix of both was renamed into place.
  const std::string tmp = out + ".tmp-" + std::to_string(::getpid());
  TempFileGuard guard(tmp);
  // 8: HF's own alignment, so the file is no larger than HF's writer makes it.
  writing_out(out, [&] { writer.open(tmp, 8); });
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    if (const int sig = stop_signal_received()) {
      throw StoppedBySignal(sig, "trainer export stopped after " + std::to_string(i) + " of " +
                                     std::to_string(plan.tensors.size()) + " tensors; " + out +
                                     " not written, " + tmp + " removed");
    }
    at::Tensor value = file_value(reader, plan.tensors[i], dtype.scalar);
    writing_out(out, [&] {
      writer.write(static_cast<int64_t>(i), 0, value.data_ptr(),
                   value.numel() * value.element_size());
    });
  }
  writing_out(out, [&] { writer.close(true); });
  before_publish();
  writing_out(out, [&] {
    std::error_code ec;
    std::filesystem::rename(tmp, out, ec);
    if (ec) throw IoError("cannot rename " + tmp + " to " + out + ": " + ec.message());
  });
  guard.release();
  return writer.file_bytes();
}

}  // namespace

int export_weights(const CliArgs& args, std::ostream& out) {
  // Ctrl-C stops between tensors, the temporary file removed (the default action left it).
  catch_stop_signals();
  // Storage that stops answering ends the export naming the file, as it ends a resume (export
  // takes no config: --set launch.timeout_s=S or its default sets the bound).
  const std::chrono::milliseconds timeout = launch_timeout_before_config(args.overrides,
                                                                         /*refuse_invalid=*/true);
  refuse_folder_as_file(args.out_path, "trainer export --out " + args.out_path);
  const std::unique_ptr<CheckpointReader> opened = open_checkpoint_within(args.checkpoint, timeout);
  const CheckpointReader& reader = *opened;
  const ExportPlan plan = plan_export(reader);
  const ExportDtype& dtype = export_dtype(args.dtype);
  // Named as Hugging Face names a model's weights: its config.json beside it, so that
  // from_pretrained(folder) loads the pair. Written under a name of its own once the weights'
  // file is complete, and renamed right after it: a failed export leaves the folder's earlier
  // pair as it was (only a hard stop between the two renames leaves new weights beside it).
  const std::filesystem::path file(args.out_path);
  const bool hf_pair = plan.gpt.heads > 0 && file.filename() == "model.safetensors";
  const std::string config = (file.parent_path() / "config.json").string();
  // Removed unless renamed into place (a second Ctrl-C may leave it: the one hard-stop slot holds
  // the weights' temporary file).
  struct UnlessRenamed {
    std::string path;
    ~UnlessRenamed() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove(path, ec);
    }
  } config_tmp{hf_pair ? config + ".tmp-" + std::to_string(::getpid()) : ""};
  const int64_t bytes = write_file(reader, plan, dtype, args.out_path, [&] {
    if (!hf_pair) return;
    writing_out(config, [&] {
      write_report_file(config_tmp.path, hf_config_json(plan.gpt, dtype),
                        "; choose a writable --out");
    });
  });
  if (hf_pair) {
    std::error_code ec;
    std::filesystem::rename(config_tmp.path, config, ec);
    if (ec) {
      throw IoError("trainer export --out " + args.out_path + ": wrote it, but cannot rename " +
                    config_tmp.path + " to " + config + " (" + ec.message() +
                    "): the config.json there is not this model's; export again");
    }
    config_tmp.path.clear();
  }
  int64_t params = 0;
  for (const auto& p : plan.tensors) params += p.tensor->numel();
  out << "exported step " << reader.step() << " of " << reader.folder() << ": "
      << plan.tensors.size() << " tensors, " << params << " parameters, " << dtype.cli << ", "
      << bytes_text(bytes)
      << (plan.kind == "gpt" ? ", Hugging Face GPT-2 names" : ", the model's own names")
      << (plan.n_head > 0 ? ", n_head " + std::to_string(plan.n_head) : std::string()) << " -> "
      << args.out_path << "\n";
  if (!plan.gpt2_config.empty()) {
    out << "  GPT2LMHeadModel(" << plan.gpt2_config
        << ") takes its tensors (load_state_dict(..., strict=False): lm_head is tied to wte)\n";
  }
  if (hf_pair) {
    out << "  " << config << " beside it: GPT2LMHeadModel.from_pretrained(\""
        << (file.parent_path().empty() ? std::string(".") : file.parent_path().string())
        << "\") loads the pair\n";
  }
  return 0;
}

}  // namespace zt::trainer
