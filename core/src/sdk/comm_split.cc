#include "zt/comm_split.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>
#include <string>

#include "zt/communicator.h"
#include "zt/error.h"

namespace zt {

namespace {

void check_color(int color, const std::string& who) {
  if (color < kSplitNoColor) {
    throw InternalError(who + ": split color " + std::to_string(color) +
                        " is invalid; pass a color >= 0, or kSplitNoColor (-1) to join none");
  }
}

}  // namespace

SplitMembers split_members(const std::vector<int>& colors, const std::vector<int>& keys, int rank) {
  if (colors.size() != keys.size() || rank < 0 || rank >= static_cast<int>(colors.size())) {
    throw InternalError("split_members: " + std::to_string(colors.size()) + " colors, " +
                        std::to_string(keys.size()) + " keys, rank " + std::to_string(rank));
  }
  for (int c : colors) check_color(c, "split_members");
  SplitMembers out;
  out.color = colors[rank];
  std::set<int> distinct(colors.begin(), colors.end());
  distinct.erase(kSplitNoColor);
  out.colors = static_cast<int>(distinct.size());
  if (out.color == kSplitNoColor) return out;
  for (int r = 0; r < static_cast<int>(colors.size()); ++r) {
    if (colors[r] == out.color) out.members.push_back(r);
  }
  // Stable on the parent rank: equal keys keep the parent's order, as MPI_Comm_split does.
  std::stable_sort(out.members.begin(), out.members.end(),
                   [&](int a, int b) { return keys[a] < keys[b]; });
  out.rank = static_cast<int>(std::find(out.members.begin(), out.members.end(), rank) -
                              out.members.begin());
  return out;
}

SplitMembers exchange_split(Communicator& parent, int color, int key) {
  check_color(color, parent.name());
  const int world = parent.size();
  at::Tensor all = at::empty({2 * static_cast<int64_t>(world)}, at::kLong);
  at::Tensor mine = all.narrow(0, 2 * parent.rank(), 2);
  mine[0] = static_cast<int64_t>(color);
  mine[1] = static_cast<int64_t>(key);
  all_gather_host(parent, all, mine);  // a device communicator gets copies on its device
  std::vector<int> colors(world), keys(world);
  const auto* v = all.data_ptr<int64_t>();
  for (int r = 0; r < world; ++r) {
    colors[r] = static_cast<int>(v[2 * r]);
    keys[r] = static_cast<int>(v[2 * r + 1]);
  }
  return split_members(colors, keys, parent.rank());
}

}  // namespace zt
