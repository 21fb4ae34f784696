// What Communicator::split decides, for every comm plugin alike: which ranks of the parent form
// this rank's new communicator, and in which order. A plugin calls exchange_split() first (a
// collective over the parent) and then connects the members its own way.
// Thread safety: exchange_split drives the parent (its issuing thread); split_members is pure.
#pragma once

#include <vector>

#include "zt/api.h"

namespace zt {

class Communicator;

// One rank's place after a split.
struct SplitMembers {
  std::vector<int> members;  // parent ranks of the new communicator, in its rank order
  int rank = -1;             // this rank's place in `members`; -1 when it joined none
  int color = -1;            // the color this rank passed
  int colors = 0;            // how many new communicators the split made (distinct colors >= 0)
};

// Pure: the ranks passing `colors[rank]` ordered by (keys[r], r). colors/keys: one per parent
// rank. Never throws for colors >= kSplitNoColor; InternalError for a smaller color or sizes
// that differ.
ZT_API SplitMembers split_members(const std::vector<int>& colors, const std::vector<int>& keys,
                                  int rank);

// Collective over `parent`: all-gathers every rank's (color, key) with it and returns
// split_members() for this rank. Throws InternalError for color < kSplitNoColor (before any
// collective, so a bad argument fails on the rank that passed it), CommError from the gather.
ZT_API SplitMembers exchange_split(Communicator& parent, int color, int key);

}  // namespace zt
