// TorchScript modules as engine units: splitting the module into units, finding tied parameters,
// the loss, and the first-batch check (models/torchscript.h); the file itself is
// torchscript_file.cc's.
#include "models/torchscript.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/script.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "models/torchscript_file.h"
#include "settings/job_settings.h"
#include "zt/error.h"

namespace zt::models {

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

std::string shape_text(const at::Tensor& t) {
  std::string s = std::string(c10::toString(t.scalar_type())) + " [";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_container(const torch::jit::Module& m) {
  const auto type = m.type()->name();
  if (!type) return false;
  const std::string name = type->qualifiedName();
  auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends_with(".ModuleList") || ends_with(".Sequential");
}

std::string class_name(const torch::jit::Module& m) {
  const auto type = m.type()->name();
  return type ? type->name() : "?";
}

// The submodule at dotted path `path` ("blocks.3"), or nothing.
std::optional<torch::jit::Module> find_submodule(const torch::jit::Module& root,
                                                 const std::string& path) {
  torch::jit::Module m = root;
  std::istringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!m.hasattr(part)) return std::nullopt;
    const c10::IValue v = m.attr(part);
    if (!v.isModule()) return std::nullopt;
    m = v.toModule();
  }
  return m;
}

// Every unit candidate a user may name: top-level children, and each container's elements.
std::vector<std::string> unit_candidates(const torch::jit::Module& root) {
  std::vector<std::string> out;
  for (const auto& child : root.named_children()) {
    out.push_back(child.name);
    if (!is_container(child.value)) continue;
    for (const auto& element : child.value.named_children()) {
      out.push_back(child.name + "." + element.name);
    }
  }
  return out;
}

// One unit: a submodule whose forward the engine calls.
class ScriptUnit final : public Unit {
 public:
  ScriptUnit(std::string name, torch::jit::Module module, NamedTensors params)
      : name_(std::move(name)), module_(std::move(module)), params_(std::move(params)) {}

  std::string name() const override { return name_; }

  at::Tensor forward(const at::Tensor& input) override {
    c10::IValue out;
    try {
      out = module_.forward({input});
    } catch (const std::exception& e) {
      // The module's own code failed: say which unit, on what, not "internal error".
      throw ConfigError("TorchScript unit '" + name_ + "' failed on input " + shape_text(input) +
                        ": " + torch_error_text(e));
    }
    if (!out.isTensor()) {
      throw ConfigError("TorchScript unit '" + name_ + "' returned " + out.tagKind() +
                        ", not one tensor; each unit's output is the next unit's input");
    }
    return out.toTensor();
  }

  std::vector<std::pair<std::string, at::Tensor>> parameters() override { return params_; }

 private:
  std::string name_;
  torch::jit::Module module_;
  NamedTensors params_;
};

class TorchScriptModel final : public TrainableModel {
 public:
  TorchScriptModel(const trainer::ModelSettings& model, torch::jit::Module module)
      : module_(std::move(module)), seed_(model.seed) {
    path_ = model.path;
    what_ = "model.path = \"" + path_ + "\" (" + model.places.where("model.path") + ")";
    module_.train(true);
    choose_units(model);
    take_parameters();
    choose_inputs(model);
    choose_loss(model);
  }

  int64_t unit_count() const override { return static_cast<int64_t>(units_.size()); }
  uint64_t seed() const override { return seed_; }

  std::vector<ParamDecl> declare(int64_t unit) const override {
    check(unit);
    return decls_[unit];
  }

  std::unique_ptr<Unit> build(int64_t unit) override {
    check(unit);
    return std::make_unique<ScriptUnit>(units_[unit].first, units_[unit].second, tensors_[unit]);
  }

  ModelInputs inputs() const override { return inputs_; }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    const at::Tensor out = output.to(at::kFloat);
    if (loss_ == "method") {
      // The module's own code, past the first batch's check: a failure on a later batch (a
      // shape that batch brings) is the module's, said as such, not "internal error".
      try {
        return module_.get_method("loss")({out, target.to(out.device())}).toTensor();
      } catch (const std::exception& e) {
        throw ConfigError(what_ + ": its loss method failed on output " + shape_text(out) +
                          " and target " + shape_text(target) + ": " + torch_error_text(e) +
                          "; fix the module, or set model.loss = \"cross_entropy\" or \"mse\"");
      }
    }
    if (loss_ == "cross_entropy") {
      return at::cross_entropy_loss(out.reshape({-1, out.size(-1)}),
                                    target.to(out.device()).reshape({-1}));
    }
    return at::mse_loss(out, target.to(out.device(), at::kFloat));
  }

  std::string describe() const override {
    std::string text = "torchscript " + path_ + " (" + class_name(module_) + "): units " +
                       join(unit_names()) + "; loss " + loss_;
    for (const auto& [borrower, owner] : tied_) text += "; " + borrower + " tied to " + owner;
    return text;
  }

  void release_initial_values() {
    for (auto& decls : decls_) {
      for (ParamDecl& d : decls) d.init = ParamInit::constant(0);
    }
  }

  // The units are the module's submodules, so the module's own flag reaches them all.
  void set_training(bool training) override { module_.train(training); }

  NamedTensors buffers() override {
    NamedTensors out;
    for (const auto& b : module_.named_buffers(true)) out.emplace_back(b.name, b.value);
    return out;
  }

  // Three checks on the first batch, before the engine takes the parameters: the units run in
  // a chain, the chain computes what the module's forward computes (else, below stage 3, the
  // module's own forward is what trains), and the loss is a finite scalar that reads no
  // parameter.
  void check_first_batch(const data::Batch& batch, int stage, bool real_data) {
    at::Tensor output;
    {
      torch::NoGradGuard no_grad;
      // Eval mode: dropout would make the two forwards differ; running statistics stay as saved.
      module_.train(false);
      output = run_units(batch.input);
      const at::Tensor whole = own_forward_checked(batch.input);
      std::string differs = difference(output, whole);
      if (differs.empty()) {
        const std::string in_training = difference_in_training(batch.input);
        if (!in_training.empty()) differs = in_training + " in training mode";
      }
      if (!differs.empty() && stage == 3) {
        throw ConfigError(what_ + ": running the units one after another gives " + differs +
                          ": its forward does more than feed each unit's output to the next "
                          "(a residual or a sum in the parent, a unit called twice, dropout or "
                          "a branch on self.training in the parent). ZeRO stage "
                          "3 gathers each unit's parameters around its call, which LibTorch's "
                          "TorchScript modules give no hooks for: train it at zero.stage 0-2 "
                          "(its own forward runs there), set model.units to the submodules its "
                          "forward calls in call order, move the extra computation into a "
                          "submodule, or train it from Python (zt.initialize)");
      }
      chain_ = differs.empty();
      if (!chain_) output = whole;
      module_.train(true);
    }
    check_loss(output, batch.target, real_data);
  }

  // The units' chain against the module's forward in training mode, each from the same default
  // generator state and buffers (restored after each, so the check draws and changes nothing):
  // dropout or a branch on self.training in the parent's forward is invisible in eval mode, and
  // would have been left out of training. "" when they agree.
  std::string difference_in_training(const at::Tensor& input) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    std::vector<at::Tensor> saved;
    for (const auto& b : module_.named_buffers(true)) saved.push_back(b.value.clone());
    const auto restore = [&] {
      {
        std::lock_guard<std::mutex> lock(generator.mutex());
        generator.set_state(state);
      }
      size_t i = 0;
      for (const auto& b : module_.named_buffers(true)) b.value.copy_(saved[i++]);
    };
    module_.train(true);
    const at::Tensor chained = run_units(input);
    restore();
    const at::Tensor whole = own_forward_checked(input);
    restore();
    module_.train(false);
    return difference(chained, whole);
  }

  // Whether training runs the units as a chain (else the module's own forward, stages 0-2).
  bool chain() const { return chain_; }
  at::Tensor own_forward(const at::Tensor& input) {
    try {
      return module_.forward({input}).toTensor();
    } catch (const std::exception& e) {  // the module's own code, as in a unit
      throw ConfigError(what_ + ": its forward failed on input " + shape_text(input) + ": " +
                        torch_error_text(e));
    }
  }

 private:
  // The units one after another on `input`; each must take the previous one's tensor.
  at::Tensor run_units(const at::Tensor& input) {
    at::Tensor x = input;
    for (size_t i = 0; i < units_.size(); ++i) {
      c10::IValue out;
      try {
        out = units_[i].second.forward({x});
      } catch (const std::exception& e) {
        throw ConfigError(what_ + ": unit '" + units_[i].first + "' (" + std::to_string(i + 1) +
                          " of " + std::to_string(units_.size()) +
                          ") failed on the first batch, input " + shape_text(x) + ": " +
                          torch_error_text(e) + "; " + data_hint());
      }
      if (!out.isTensor()) {
        throw ConfigError(what_ + ": unit '" + units_[i].first + "' returned " + out.tagKind() +
                          ", not one tensor; each unit's output must be the next unit's input "
                          "(set model.units to such submodules)");
      }
      x = out.toTensor();
    }
    return x;
  }

  // The module's own forward on `input`, which must give one tensor.
  at::Tensor own_forward_checked(const at::Tensor& input) {
    c10::IValue whole_out;
    try {
      whole_out = module_.forward({input});
    } catch (const std::exception& e) {
      throw ConfigError(what_ + ": the module's own forward failed on the first batch, input " +
                        shape_text(input) + ": " + torch_error_text(e) + "; " + data_hint());
    }
    if (!whole_out.isTensor()) {
      throw ConfigError(what_ + ": the module's forward returns " + whole_out.tagKind() +
                        ", not one tensor; zt trains modules whose forward maps one tensor to one");
    }
    return whole_out.toTensor();
  }

  // "" when `chained` (the units one after another) is what the module's forward gave, else
  // how they differ: the shapes, or the largest difference between values and where.
  static std::string difference(const at::Tensor& chained, const at::Tensor& whole) {
    if (!whole.sizes().equals(chained.sizes())) {
      return shape_text(chained) + " where the module's forward gives " + shape_text(whole);
    }
    if (at::allclose(whole, chained, 1e-4, 1e-5)) return "";
    const at::Tensor gap = (whole.to(at::kDouble) - chained.to(at::kDouble)).abs().flatten();
    const int64_t at = gap.argmax().item<int64_t>();
    char text[160];
    std::snprintf(text, sizeof text,
                  "values up to %.6g away from the module's forward's (element %lld: %.6g "
                  "instead of %.6g)",
                  gap[at].item<double>(), static_cast<long long>(at),
                  chained.flatten()[at].item<double>(), whole.flatten()[at].item<double>());
    return shape_text(chained) + " " + text;
  }

  // The loss of the first batch: a finite scalar, computed without reading a parameter.
  void check_loss(const at::Tensor& output, const at::Tensor& target, bool real_data) {
    at::Tensor value;
    try {
      // With autograd on: `output` needs no gradient, so a loss that does can only have read a
      // parameter.
      at::AutoGradMode grad(true);
      value = loss(output, target);
    } catch (const std::exception& e) {
      throw ConfigError(what_ + ": the " + loss_ + " loss failed on the first batch, output " +
                        shape_text(output) + ", target " + shape_text(target) + ": " +
                        torch_error_text(e) + "; choose model.loss to fit");
    }
    if (value.requires_grad()) {
      // zt gathers a parameter only around its unit: at stage 3 such a loss reads freed storage.
      throw ConfigError(what_ +
                        ": the module's loss method reads its parameters (the result "
                        "needs a gradient although the output given to it does not); zt gathers "
                        "parameters only around the unit that owns them, so compute such terms "
                        "(a regulariser) inside a unit's forward, or use model.loss = "
                        "\"cross_entropy\" or \"mse\"");
    }
    if (value.numel() != 1) {
      throw ConfigError(what_ + ": the " + loss_ + " loss of the first batch is " +
                        shape_text(value) +
                        ", not a scalar; a loss method must return the mean loss as one number");
    }
    // Synthetic ids span the whole vocab, which a model may rule out in part (-inf logits for
    // the padding of its vocabulary): only real data's loss must be finite.
    if (real_data && !std::isfinite(value.item<double>())) {
      throw ConfigError(what_ + ": the " + loss_ + " loss of the first batch is not finite (" +
                        std::to_string(value.item<double>()) +
                        "); a loss method must return the mean loss as one number, and a "
                        "model that rules ids out with -inf logits must not meet them as "
                        "targets in its data");
    }
  }

  void check(int64_t unit) const {
    if (unit < 0 || unit >= unit_count()) {
      throw InternalError("torchscript model: unit " + std::to_string(unit) + " out of range 0.." +
                          std::to_string(unit_count() - 1));
    }
  }

  std::string data_hint() const {
    return inputs_.tokens ? "the data is token ids [micro_batch, model.seq_len = " +
                                std::to_string(inputs_.seq_len) + "] below vocab " +
                                std::to_string(inputs_.vocab) +
                                " (model.vocab; byte-level text: 256): make them fit the module"
                          : "the data's shapes are model.input_shape and model.target_shape: make "
                            "them fit the module";
  }

  void choose_units(const trainer::ModelSettings& model) {
    const std::vector<std::string> candidates = unit_candidates(module_);
    std::vector<std::string> wanted = model.units;
    if (wanted.empty()) {
      for (const auto& child : module_.named_children()) {
        wanted.push_back(is_container(child.value) ? child.name + ".*" : child.name);
      }
    }
    for (const std::string& pattern : wanted) {
      const bool all = pattern.size() > 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0;
      const std::string path = all ? pattern.substr(0, pattern.size() - 2) : pattern;
      std::optional<torch::jit::Module> found = find_submodule(module_, path);
      if (!found) {
        throw ConfigError(model.places.where("model.units") + ": model.units entry \"" + pattern +
                          "\" matches no submodule of " + path_ + "; it has: " + join(candidates) +
                          " (use \"name.*\" for each element of a list)");
      }
      if (!all) {
        units_.emplace_back(path, *found);
        continue;
      }
      const size_t before = units_.size();
      for (const auto& element : found->named_children()) {
        units_.emplace_back(path + "." + element.name, element.value);
      }
      if (units_.size() == before) {
        throw ConfigError(model.places.where("model.units") + ": model.units entry \"" + pattern +
                          "\" names a module with no children in " + path_ +
                          "; it has: " + join(candidates));
      }
    }
    if (units_.empty()) {
      throw ConfigError(what_ +
                        ": the module has no submodules to run as units; wrap its layers "
                        "in submodules (or an nn.Sequential) so the engine can gather and free "
                        "each in turn");
    }
  }

  // A parameter tensor as the unit that first listed it owns it.
  struct Owner {
    std::string name;
    at::Tensor tensor;
    std::string unit;
  };

  // The owner of `tensor` among `owners`: the same tensor, or one over the same storage with the
  // same offset, sizes and strides (torch.jit.save can split a tied tensor into two such); null
  // when none.
  static const Owner* find_owner(const std::vector<Owner>& owners, const at::Tensor& tensor) {
    for (const Owner& o : owners) {
      const bool same =
          o.tensor.unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl() ||
          (o.tensor.storage().unsafeGetStorageImpl() == tensor.storage().unsafeGetStorageImpl() &&
           o.tensor.storage_offset() == tensor.storage_offset() &&
           o.tensor.sizes().equals(tensor.sizes()) && o.tensor.strides().equals(tensor.strides()));
      if (same) return &o;
    }
    return nullptr;
  }

  // Each unit's parameters under the module's own names; a tensor (or storage) seen in an
  // earlier unit is borrowed from it and the later module is pointed at the owner's tensor.
  void take_parameters() {
    std::vector<Owner> owners;
    std::map<std::string, std::string> unit_of;
    for (const auto& [unit, module] : units_) {
      NamedTensors tensors;
      std::vector<ParamDecl> decls;
      for (const auto& p : module.named_parameters(true)) {
        const std::string name = unit + "." + p.name;
        check_trainable(name, p.value, unit, unit_of);
        unit_of[name] = unit;
        if (const Owner* owner = find_owner(owners, p.value)) {
          declare_borrowed(name, p.value, unit, *owner, tensors, decls);
        } else {
          owners.push_back({name, p.value, unit});
          declare_owned(name, p.value, tensors, decls);
        }
      }
      tensors_.push_back(std::move(tensors));
      decls_.push_back(std::move(decls));
    }
    if (owners.empty()) {
      throw ConfigError(what_ + ": the module has no parameters, so there is nothing to train");
    }
    check_every_parameter_in_a_unit(unit_of, owners);
  }

  // A parameter zt can train: it requires grad and is in one unit only.
  void check_trainable(const std::string& name, const at::Tensor& value, const std::string& unit,
                       const std::map<std::string, std::string>& unit_of) const {
    if (!value.requires_grad()) {
      throw ConfigError(what_ + ": parameter " + name +
                        " does not require grad (frozen); zt "
                        "trains every parameter: register it with register_buffer instead");
    }
    const auto it = unit_of.find(name);
    if (it != unit_of.end()) {
      throw ConfigError(what_ + ": parameter " + name + " is in units '" + it->second + "' and '" +
                        unit +
                        "'; model.units must not list a module and one "
                        "of its submodules");
    }
  }

  // A tensor this unit owns: declared with the values the file saved, kept by this alias of the
  // loaded storage after the engine re-points the parameter into its own buffers.
  void declare_owned(const std::string& name, const at::Tensor& value, NamedTensors& tensors,
                     std::vector<ParamDecl>& decls) {
    const at::Tensor saved = value.detach();
    tensors.emplace_back(name, value);
    decls.push_back(
        {name, value.sizes().vec(),
         ParamInit::from_function([saved](const at::Tensor& full) { full.copy_(saved); })});
  }

  // A tensor an earlier unit owns (a tied weight): the module is pointed at the owner's tensor,
  // and the unit borrows it under the owner's name (once per unit).
  void declare_borrowed(const std::string& name, const at::Tensor& value, const std::string& unit,
                        const Owner& owner, NamedTensors& tensors, std::vector<ParamDecl>& decls) {
    if (owner.tensor.unsafeGetTensorImpl() != value.unsafeGetTensorImpl()) {
      point_at(name, owner.tensor);
    }
    tied_.emplace_back(name, owner.name);
    // Listed once per unit: a second listing in the same unit is not a borrow.
    if (owner.unit == unit) return;
    tensors.emplace_back(owner.name, owner.tensor);
    decls.push_back({owner.name, owner.tensor.sizes().vec(), ParamInit::constant(0)});
  }

  // Every parameter of the module is in a unit, or tied to one that is.
  void check_every_parameter_in_a_unit(const std::map<std::string, std::string>& unit_of,
                                       const std::vector<Owner>& owners) const {
    for (const auto& p : module_.named_parameters(true)) {
      if (unit_of.count(p.name) || find_owner(owners, p.value)) continue;
      throw ConfigError(what_ + ": parameter " + p.name + " belongs to no unit (units: " +
                        join(unit_names()) + "); add its module to model.units" +
                        (p.name.find('.') == std::string::npos
                             ? ", or move it from the top-level module into a submodule"
                             : ""));
    }
  }

  // Makes attribute `name` ("head.weight") of the module refer to `owner`.
  void point_at(const std::string& name, const at::Tensor& owner) {
    const size_t dot = name.rfind('.');
    std::optional<torch::jit::Module> holder = find_submodule(module_, name.substr(0, dot));
    if (!holder) throw InternalError("torchscript model: no module holds " + name);
    holder->setattr(name.substr(dot + 1), owner);
  }

  std::vector<std::string> unit_names() const {
    std::vector<std::string> names;
    for (const auto& u : units_) names.push_back(u.first);
    return names;
  }

  void choose_inputs(const trainer::ModelSettings& model) {
    const std::vector<double>& in = model.input_shape;
    const std::vector<double>& target = model.target_shape;
    auto sizes = [&](const std::string& key, const std::vector<double>& values) {
      // One sample's elements in an int64 with room to spare: past it, the cast was undefined
      // and the product (a sample's size) wrapped into a LibTorch error naming no key.
      constexpr double kMaxElements = 1ULL << 40;
      std::vector<int64_t> out;
      double elements = 1;
      for (double v : values) {
        elements *= v;
        if (v < 1 || v != std::floor(v) || !(elements <= kMaxElements)) {
          throw ConfigError(model.places.where("model." + key) + ": model." + key +
                            " must list whole sizes >= 1 (one sample's shape, without the batch)" +
                            " of at most 2^40 elements in all");
        }
        out.push_back(static_cast<int64_t>(v));
      }
      return out;
    };
    if (!in.empty() || !target.empty()) {
      if (in.empty() || target.empty()) {
        throw ConfigError(
            model.places.where(in.empty() ? "model.target_shape" : "model.input_shape") +
            ": a model on vectors needs both model.input_shape and "
            "model.target_shape (one sample each, without the batch)");
      }
      inputs_.tokens = false;
      inputs_.input_shape = sizes("input_shape", in);
      inputs_.target_shape = sizes("target_shape", target);
      return;
    }
    inputs_.seq_len = model.seq_len;
    inputs_.vocab = model.vocab > 0 ? model.vocab : (model.byte_level ? 256 : 0);
    if (inputs_.seq_len <= 0 || inputs_.vocab <= 0) {
      throw ConfigError(what_ + ": a TorchScript model on token ids needs model.seq_len and "
                                "model.vocab (byte-level text: vocab 256); for vector data set "
                                "model.input_shape and model.target_shape instead");
    }
  }

  void choose_loss(const trainer::ModelSettings& model) {
    loss_ = model.loss;
    const bool has_method = module_.find_method("loss").has_value();
    if (loss_ == "auto") loss_ = has_method ? "method" : inputs_.tokens ? "cross_entropy" : "mse";
    if (loss_ == "method" && !has_method) {
      throw ConfigError(model.places.where("model.loss") + ": model.loss = \"method\" but " +
                        path_ + " (" + class_name(module_) +
                        ") has no loss method; add "
                        "`def loss(self, output, target)` (scripted: @torch.jit.export) or choose "
                        "\"cross_entropy\" or \"mse\"");
    }
    if (loss_ == "cross_entropy" && !inputs_.tokens) {
      throw ConfigError(model.places.where("model.loss") +
                        ": model.loss = \"cross_entropy\" needs "
                        "class ids as targets, but vector data gives N(0, 1) targets; use "
                        "\"mse\" or a loss method");
    }
  }

  torch::jit::Module module_;
  uint64_t seed_;
  std::string path_;
  std::string what_;  // "model.path = "m.pt" (job.toml:5:1)", for messages
  std::vector<std::pair<std::string, torch::jit::Module>> units_;
  std::vector<NamedTensors> tensors_;
  std::vector<std::vector<ParamDecl>> decls_;
  std::vector<std::pair<std::string, std::string>> tied_;  // (borrower, owner)
  ModelInputs inputs_;
  std::string loss_;
  bool chain_ = true;  // check_first_batch's finding
};

}  // namespace

std::shared_ptr<TrainableModel> load_torchscript(const trainer::ModelSettings& model) {
  const std::string& path = model.path;
  const std::string what = "model.path = \"" + path + "\" (" + model.places.where("model.path") +
                           ")";
  return std::make_shared<TorchScriptModel>(model, load_torchscript_file(path, what));
}

void release_initial_values(TrainableModel& model) {
  auto* script = dynamic_cast<TorchScriptModel*>(&model);
  if (script) script->release_initial_values();
}

std::function<at::Tensor(const at::Tensor&)> check_first_batch(TrainableModel& model,
                                                               const data::DataSource& data,
                                                               int stage, bool real_data) {
  auto* script = dynamic_cast<TorchScriptModel*>(&model);
  if (!script) return {};
  script->check_first_batch(data.get_samples(0, data.micro_batch()), stage, real_data);
  if (script->chain()) return {};
  return [script](const at::Tensor& input) { return script->own_forward(input); };
}

}  // namespace zt::models
