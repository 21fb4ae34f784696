#include "zero/weight_decay_runs.h"

#include <fnmatch.h>

#include <algorithm>

namespace zt {

namespace {

bool matches(const std::string& pattern, const std::string& name) {
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

bool exempt_from_weight_decay(const std::string& name, const std::vector<std::string>& patterns) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return matches(p, name); });
}

std::string mark_decay_free(ModelLayout& layout, const std::vector<std::string>& patterns,
                            const std::string& where) {
  std::vector<std::string> unmatched;
  for (const std::string& pattern : patterns) {
    if (std::none_of(layout.params.begin(), layout.params.end(),
                     [&](const ParamSlot& p) { return matches(pattern, p.name); }))
      unmatched.push_back("'" + pattern + "'");
  }
  for (ParamGroup& g : layout.groups) {
    g.decay_free.clear();
    for (int i : g.params) {  // in flat-offset order
      const ParamSlot& p = layout.params[static_cast<size_t>(i)];
      if (p.numel == 0 || !exempt_from_weight_decay(p.name, patterns)) continue;
      if (!g.decay_free.empty() && g.decay_free.back().second == p.offset) {
        g.decay_free.back().second += p.numel;
      } else {
        g.decay_free.emplace_back(p.offset, p.offset + p.numel);
      }
    }
  }
  if (unmatched.empty()) return "";
  std::string names;
  for (size_t i = 0; i < layout.params.size() && i < 8; ++i)
    names += (i ? ", " : "") + layout.params[i].name;
  if (layout.params.size() > 8) names += ", ...";
  std::string list;
  for (size_t i = 0; i < unmatched.size(); ++i) list += (i ? ", " : "") + unmatched[i];
  return where + ": " + (unmatched.size() == 1 ? "the pattern " : "the patterns ") + list +
         (unmatched.size() == 1 ? " matches" : " match") +
         " no parameter of this model (its names: " + names +
         "), so weight decay applies where a misspelt pattern meant to exempt; fix it (a shell "
         "glob over the whole name, e.g. \"*.bias\"), or remove it where the model has no such "
         "parameter";
}

namespace {

// Elements [begin, end) of `whole` (offsets into it), with the given kind.
ShardTensors slice_of(const ShardTensors& whole, int64_t begin, int64_t end, bool decay) {
  auto part = [&](const at::Tensor& t) {
    return t.defined() ? t.narrow(0, begin, end - begin) : t;
  };
  ShardTensors s;
  s.param = part(whole.param);
  s.grad = part(whole.grad);
  for (const at::Tensor& t : whole.states) s.states.push_back(part(t));
  s.copy_out = part(whole.copy_out);
  s.seed = whole.seed + static_cast<uint64_t>(begin);
  s.weight_decay = decay && whole.weight_decay;
  return s;
}

}  // namespace

void append_by_weight_decay(std::vector<ShardTensors>& out, const ShardTensors& whole,
                            const ParamGroup& group, int64_t flat_begin) {
  const auto& runs = group.decay_free;
  const int64_t n = whole.param.numel();
  if (n == 0) {
    out.push_back(whole);
    return;
  }
  const int64_t flat_end = flat_begin + n;
  // The first run that ends after the slice starts.
  auto run = std::upper_bound(
      runs.begin(), runs.end(), flat_begin,
      [](int64_t v, const std::pair<int64_t, int64_t>& r) { return v < r.second; });
  if (run == runs.end() || run->first >= flat_end) {
    out.push_back(whole);
    return;
  }
  int64_t at = flat_begin;  // the next element not yet appended
  for (; run != runs.end() && run->first < flat_end; ++run) {
    const int64_t free_begin = std::max(run->first, flat_begin);
    const int64_t free_end = std::min(run->second, flat_end);
    if (free_begin > at)
      out.push_back(slice_of(whole, at - flat_begin, free_begin - flat_begin, true));
    out.push_back(slice_of(whole, free_begin - flat_begin, free_end - flat_begin, false));
    at = free_end;
  }
  if (at < flat_end) out.push_back(slice_of(whole, at - flat_begin, n, true));
}

}  // namespace zt
