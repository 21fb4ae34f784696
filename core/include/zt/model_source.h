// ModelSource: a model the engine builds one unit at a time, keeping only this rank's shards
// (partitioned construction: DeepSpeed's zero.Init, ColossalAI's ZeroInitContext, FSDP's
// meta-device init). A model declares every unit's parameters (names, shapes, initialisers)
// before any of them exists; the engine lays out and places every group from those declarations,
// then builds unit 0, 1, ... in order, pointing each new unit's parameters into its flat buffers
// and writing the declared initial values into the elements this rank holds only. At stage 3 a
// rank so never holds a unit's full parameters while the model is built, and with offload the
// shards go straight to their tier.
// The same declarations make the model in full for a single process (materialize_unit below),
// with the same values, so the oracle's reference and every world size start from one point.
// Thread safety: used from the training thread only, once, while the engine is built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/api.h"
#include "zt/param_init.h"
#include "zt/unit.h"

namespace zt {

struct ParamDecl {
  std::string name;            // as Unit::parameters() lists it
  std::vector<int64_t> shape;  // the tensor's full shape
  ParamInit init;
};

class ZT_API ModelSource {
 public:
  virtual ~ModelSource();
  // Units in call order (unit i's output is unit i+1's input). Never throws.
  virtual int64_t unit_count() const = 0;
  // The seed the declared initialisers use (run.seed). Never throws.
  virtual uint64_t seed() const = 0;
  // Every parameter unit `unit` uses, in the order its parameters() will list them.
  //   unit: in, 0 <= unit < unit_count().
  //   returns: the declarations. A name an earlier unit declared is borrowed from it (a tied
  //            weight): same shape, its init is ignored, and build() must hand the very tensor
  //            the earlier unit listed.
  // Called before any unit is built, possibly more than once; must not allocate parameters.
  virtual std::vector<ParamDecl> declare(int64_t unit) const = 0;
  // Builds unit `unit`; called once per unit, in order 0, 1, ..., after declare().
  //   returns: the unit, whose parameters() lists declare(unit)'s names and shapes in order, each
  //            requiring grad. Their values are never read: allocate them without writing
  //            (at::empty), and the engine replaces their storage with its flat buffers.
  // Throws what the model's code throws; a mismatch with the declarations is an InternalError
  // from the engine naming the unit and the tensor.
  virtual std::unique_ptr<Unit> build(int64_t unit) = 0;
};

// Builds unit `unit` of `source` in full and writes every declared initial value into it (a
// borrowed tensor keeps the values its owner got): the single-process model, with the values a
// partitioned build gives.
ZT_API std::unique_ptr<Unit> materialize_unit(ModelSource& source, int64_t unit);

}  // namespace zt
