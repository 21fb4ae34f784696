#include "zt/tensor_checks.h"

#include <ATen/ATen.h>

#include <sstream>

#include "zt/communicator.h"
#include "zt/error.h"

namespace zt {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& problem,
                       const std::string& hint) {
  throw InternalError(what + " " + problem + (hint.empty() ? "" : "; " + hint));
}

// "Float", "Float or Half", "Float, BFloat16 or Half".
std::string dtype_list(const std::vector<at::ScalarType>& allowed) {
  std::string out;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) out += i + 1 == allowed.size() ? " or " : ", ";
    out += c10::toString(allowed[i]);
  }
  return out;
}

}  // namespace

void check_defined(const at::Tensor& t, const std::string& what, const std::string& hint) {
  if (!t.defined()) fail(what, "is undefined", hint);
}

void check_device(const at::Tensor& t, const std::string& what, const c10::Device& expected,
                  const std::string& expected_source, const std::string& hint) {
  if (t.device() == expected) return;
  fail(what, "is on " + t.device().str() + " but " + expected_source + " is on " + expected.str(),
       hint);
}

void check_contiguous(const at::Tensor& t, const std::string& what, const std::string& hint) {
  if (t.is_contiguous()) return;
  std::ostringstream os;
  os << "is not contiguous (sizes " << t.sizes() << ", strides " << t.strides() << ")";
  fail(what, os.str(), hint);
}

void check_numel(const at::Tensor& t, const std::string& what, int64_t expected,
                 const std::string& expected_source, const std::string& hint) {
  if (t.numel() == expected) return;
  fail(what,
       "has " + std::to_string(t.numel()) + " elements but " + expected_source + " has " +
           std::to_string(expected),
       hint);
}

void check_dtype(const at::Tensor& t, const std::string& what,
                 const std::vector<at::ScalarType>& allowed, const std::string& hint) {
  for (at::ScalarType s : allowed) {
    if (t.scalar_type() == s) return;
  }
  fail(what,
       std::string("has dtype ") + c10::toString(t.scalar_type()) + ", expected " +
           dtype_list(allowed),
       hint);
}

void check_host_tensor(const at::Tensor& t, const std::string& what,
                       const std::string& device_hint) {
  check_defined(t, what);
  if (!t.device().is_cpu()) {
    fail(what, "is on " + t.device().str() + ", not in host memory", device_hint);
  }
  check_contiguous(t, what);
}

void check_shard_of(const at::Tensor& shard, const at::Tensor& flat, const std::string& where,
                    const std::string& shard_name, const std::string& flat_name, int world,
                    int rank) {
  const std::string what = where + ": " + shard_name;
  check_dtype(shard, what, {flat.scalar_type()}, "a shard has the dtype of its " + flat_name);
  const ShardRange range = flat_shard(flat.numel(), world, rank);
  check_numel(shard, what, range.size(),
              "rank " + std::to_string(rank) + "'s shard of a " + std::to_string(flat.numel()) +
                  "-element " + flat_name);
}

}  // namespace zt
