// The names and layouts zt's tensors take in an exported weights file, so the file loads where
// people use it. A GPT is written as Hugging Face's GPT-2 (GPT2LMHeadModel) names it:
//   wte.weight               -> transformer.wte.weight          (same for wpe)
//   block<i>.ln1.*           -> transformer.h.<i>.ln_1.*         (ln2 -> ln_2)
//   block<i>.attn.qkv.*      -> transformer.h.<i>.attn.c_attn.*
//   block<i>.attn.proj.*     -> transformer.h.<i>.attn.c_proj.*
//   block<i>.mlp.fc.*        -> transformer.h.<i>.mlp.c_fc.*
//   block<i>.mlp.proj.*      -> transformer.h.<i>.mlp.c_proj.*
//   ln_f.*                   -> transformer.ln_f.*
// HF's GPT-2 computes those four projections with Conv1D, whose weight is [in, out]: the
// transpose of zt's nn.Linear [out, in]; biases and LayerNorms keep their layout. The tied LM
// head is the wte itself (zt lists it under "wte.weight"), so no lm_head tensor is written,
// as in gpt2's own model.safetensors. An MLP keeps zt's own names (layer<i>.weight/bias).
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace zt::models {

struct ExportedName {
  std::string name;        // the tensor's name in the file
  bool transpose = false;  // stored as its transpose (HF's Conv1D layout)
};

// "gpt" when the tensor names are a zt GPT's (a "wte.weight", and every name one of its), else
// "mlp": names kept as they are (the mlp's, a TorchScript or plugin model's own).
std::string model_kind_of(const std::vector<std::string>& zt_names);

// How zt tensor `zt_name` of a model of `model_kind` ("gpt" | "mlp") is written.
// Throws InternalError for a GPT tensor this mapping does not know (a model changed without
// its mapping).
ExportedName exported_name(const std::string& model_kind, const std::string& zt_name);

// The inverse, for a name found in a file: the zt tensor it holds and whether it is stored
// transposed. GPT names are accepted with or without HF's "transformer." prefix (HF writes
// both). nullopt for a name that is no zt parameter: one of HF's non-parameter tensors
// (is_ignored_hf_tensor) or a name of another model.
std::optional<ExportedName> zt_name_of(const std::string& model_kind, const std::string& file_name);

// HF GPT-2 tensors that a GPT file may hold but that are no parameter of their own: the
// attention mask buffers (h.<i>.attn.bias, h.<i>.attn.masked_bias) and lm_head.weight (tied to
// wte). A loader skips them.
bool is_ignored_hf_tensor(const std::string& file_name);

}  // namespace zt::models
