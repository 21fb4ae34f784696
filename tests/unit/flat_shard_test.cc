// The flat sharding convention every collective shares (torch.chunk split).
#include <doctest/doctest.h>

#include <vector>

#include "zt/communicator.h"

TEST_CASE("flat_shard covers every element exactly once, in rank order, for any length") {
  for (int world = 1; world <= 7; ++world) {
    for (int64_t numel : {0, 1, 2, 3, 5, 7, 16, 17, 1000, 1001}) {
      CAPTURE(world);
      CAPTURE(numel);
      std::vector<int> seen(static_cast<size_t>(numel), 0);
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        zt::ShardRange s = zt::flat_shard(numel, world, r);
        CHECK(s.begin == next);
        CHECK(s.size() >= 0);
        CHECK(s.size() <= zt::padded_shard_numel(numel, world));
        for (int64_t i = s.begin; i < s.end; ++i) seen[static_cast<size_t>(i)]++;
        next = s.end;
      }
      CHECK(next == numel);
      for (int count : seen) CHECK(count == 1);
    }
  }
  CHECK(zt::padded_shard_numel(10, 4) == 3);
  CHECK(zt::flat_shard(10, 4, 3).size() == 1);
  CHECK(zt::flat_shard(1, 3, 2).size() == 0);
}
