// The single-process build of a ModelSource: a unit in full, checked against its declarations,
// with the declared initial values written into the tensors it owns.
#include "zt/model_source.h"

#include "zt/model_plugin.h"

#include <unordered_set>

#include "zt/error.h"

namespace zt {

ModelSource::~ModelSource() = default;

std::vector<std::pair<std::string, at::Tensor>> TrainableModel::buffers() { return {}; }

void TrainableModel::set_training(bool) {}

namespace {

std::string shape_str(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Names declared by units before `unit`: a later unit lists them as borrowed (tied) tensors.
std::unordered_set<std::string> declared_before(const ModelSource& source, int64_t unit) {
  std::unordered_set<std::string> names;
  for (int64_t u = 0; u < unit; ++u) {
    for (const ParamDecl& decl : source.declare(u)) names.insert(decl.name);
  }
  return names;
}

// The unit's parameters() must be its declarations, in order: the engine lays out flat buffers
// from the declarations and points the built tensors into them by position.
void check_against_declarations(Unit& built, const std::vector<ParamDecl>& decls, int64_t unit) {
  const auto params = built.parameters();
  const std::string where = "model source unit " + std::to_string(unit) + " (" + built.name() + ")";
  if (params.size() != decls.size()) {
    throw InternalError(where + " lists " + std::to_string(params.size()) +
                        " parameters but declared " + std::to_string(decls.size()) +
                        "; make build() create exactly the tensors declare() names, in order");
  }
  for (size_t i = 0; i < decls.size(); ++i) {
    const auto& [name, tensor] = params[i];
    const ParamDecl& decl = decls[i];
    if (name != decl.name || !tensor.defined() || tensor.sizes() != at::IntArrayRef(decl.shape)) {
      throw InternalError(
          where + ": parameter " + std::to_string(i) + " is '" + name + "' " +
          (tensor.defined() ? shape_str(tensor.sizes()) : std::string("(undefined)")) +
          " but the declaration is '" + decl.name + "' " + shape_str(decl.shape) +
          "; declare() and build() must agree on names, shapes and order");
    }
    if (!tensor.requires_grad()) {
      throw InternalError(where + ": parameter '" + name +
                          "' does not require grad; create it with requires_grad_()");
    }
  }
}

}  // namespace

std::unique_ptr<Unit> materialize_unit(ModelSource& source, int64_t unit) {
  if (unit < 0 || unit >= source.unit_count()) {
    throw InternalError("materialize_unit: unit " + std::to_string(unit) +
                        " is out of range; the model source has " +
                        std::to_string(source.unit_count()) + " units (0.." +
                        std::to_string(source.unit_count() - 1) + ")");
  }
  const std::vector<ParamDecl> decls = source.declare(unit);
  const std::unordered_set<std::string> borrowed = declared_before(source, unit);
  std::unique_ptr<Unit> built = source.build(unit);
  if (!built) {
    throw InternalError("materialize_unit: the model source built no unit " + std::to_string(unit) +
                        "; build() must return the unit");
  }
  check_against_declarations(*built, decls, unit);
  const auto params = built->parameters();
  for (size_t i = 0; i < decls.size(); ++i) {
    if (borrowed.count(decls[i].name) == 0) {
      init_param(params[i].second, decls[i].init, source.seed(), decls[i].name);
    }
  }
  return built;
}

}  // namespace zt
