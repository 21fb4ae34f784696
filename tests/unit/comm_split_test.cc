// split_members: which ranks form a rank's new communicator after Communicator::split, and in
// what order (MPI_Comm_split's rules: same color together, ordered by key, ties by rank).
#include <doctest/doctest.h>

#include "../test_util.h"
#include "zt/comm_split.h"
#include "zt/communicator.h"
#include "zt/error.h"

using zt::split_members;

TEST_CASE("split_members: ranks of one color, ordered by key then by parent rank") {
  // Ranks 0..5, colors 0 1 0 1 0 1, keys make rank 4 first among color 0, ties at key 1.
  const std::vector<int> colors{0, 1, 0, 1, 0, 1}, keys{1, 0, 1, 0, 0, 0};
  const zt::SplitMembers r2 = split_members(colors, keys, 2);
  CHECK(r2.members == std::vector<int>{4, 0, 2});
  CHECK(r2.rank == 2);
  CHECK(r2.color == 0);
  CHECK(r2.colors == 2);
  const zt::SplitMembers r5 = split_members(colors, keys, 5);
  CHECK(r5.members == std::vector<int>{1, 3, 5});
  CHECK(r5.rank == 2);
}

TEST_CASE("split_members: kSplitNoColor joins none and is not counted as a color") {
  const std::vector<int> colors{zt::kSplitNoColor, 4, 4}, keys{0, 0, 0};
  const zt::SplitMembers left_out = split_members(colors, keys, 0);
  CHECK(left_out.rank == -1);
  CHECK(left_out.members.empty());
  CHECK(left_out.colors == 1);
  CHECK(split_members(colors, keys, 2).members == std::vector<int>{1, 2});
}

TEST_CASE("split_members: a color below kSplitNoColor or mismatched sizes are refused") {
  CHECK_THROWS_AS(split_members({0, -2}, {0, 0}, 0), zt::InternalError);
  CHECK(zt::test::contains(zt::test::error_of<zt::InternalError>([] {
                             split_members({0, -2}, {0, 0}, 0);
                           }),
                           "kSplitNoColor"));
  CHECK_THROWS_AS(split_members({0, 0}, {0}, 0), zt::InternalError);
  CHECK_THROWS_AS(split_members({0, 0}, {0, 0}, 2), zt::InternalError);
}
