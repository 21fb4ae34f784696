// shard_tensor: one padded flat group per tensor. The plugin is loaded the way the engine loads
// it (PluginCatalog, from the build tree's lib/zt/plugins) and its plans are checked for layout
// properties over world sizes 1..7 and hand-picked plus seeded random tensor-size lists.
#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"
#include "zt/shard_strategy.h"

namespace {

constexpr int kMaxWorld = 7;

// One catalog for the whole run: plugin libraries stay loaded for the life of the process anyway.
zt::PluginCatalog& catalog() {
  static zt::PluginCatalog instance;
  return instance;
}

std::unique_ptr<zt::ShardStrategy> make_strategy() {
  const zt::ShardStrategyPlugin& factory = catalog().shard("shard_tensor");
  return factory.create(zt::Options("plugin.shard_tensor", factory.options(), {}, {}));
}

std::vector<zt::TensorMeta> metas(const std::vector<int64_t>& sizes, int64_t element_size = 4) {
  std::vector<zt::TensorMeta> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({"t" + std::to_string(i), sizes[i], element_size});
  }
  return out;
}

// Edge cases first (empty unit, empty tensors, single elements, primes, one huge tensor), then
// seeded random lists so failures reproduce.
std::vector<std::vector<int64_t>> size_lists() {
  std::vector<std::vector<int64_t>> lists = {{},
                                             {0},
                                             {1},
                                             {0, 0, 0},
                                             {1, 0, 1},
                                             {7},
                                             {6, 7, 8},
                                             {3, 5, 7, 11, 13},
                                             {1, 2, 3, 4, 5, 6, 7, 8},
                                             {1 << 24},
                                             {1, 100000007, 1},
                                             {5, 0, 9, 0, 2},
                                             {420, 840, 1260}};
  std::mt19937_64 rng(20240601);
  for (int k = 0; k < 300; ++k) {
    std::vector<int64_t> sizes(rng() % 12);
    for (auto& s : sizes) {
      switch (rng() % 8) {
        case 0: s = 0; break;
        case 1: s = 1; break;
        case 2: s = static_cast<int64_t>(rng() % 50000000); break;  // up to ~200 MB in fp32
        default: s = static_cast<int64_t>(rng() % 5000);
      }
    }
    lists.push_back(sizes);
  }
  return lists;
}

std::string describe(const std::vector<int64_t>& sizes, int world) {
  std::string s = "world=" + std::to_string(world) + " sizes=[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + "]";
}

}  // namespace

TEST_CASE("the plugin loads through the catalog as a shard plugin with no options") {
  const zt::PluginRecord& record = catalog().load("shard_tensor");
  CHECK(record.id == "shard_tensor");
  CHECK(record.kind == ZT_KIND_SHARD);
  CHECK(catalog().shard("shard_tensor").options().empty());
  CHECK(make_strategy() != nullptr);
}

TEST_CASE("five tensors give five groups, each padded to the next multiple of the world size") {
  auto strategy = make_strategy();
  std::vector<int64_t> sizes = {10, 3, 0, 1, 8};
  zt::ShardPlan plan = strategy->plan(metas(sizes), 4);
  zt::validate_plan(plan, metas(sizes), 4, "shard_tensor");
  REQUIRE(plan.groups.size() == 5);
  const std::vector<int64_t> padded = {12, 4, 0, 4, 8};
  for (size_t g = 0; g < 5; ++g) {
    CAPTURE(g);
    CHECK(plan.groups[g].numel == sizes[g]);
    CHECK(plan.groups[g].padded_numel == padded[g]);
    REQUIRE(plan.groups[g].segments.size() == 1);
    CHECK(plan.groups[g].segments[0].tensor == static_cast<int>(g));
    CHECK(plan.groups[g].segments[0].flat_offset == 0);
  }
}

TEST_CASE("every tensor is alone in its own group at offset 0, padding under the world size") {
  auto strategy = make_strategy();
  for (const auto& sizes : size_lists()) {
    for (int world = 1; world <= kMaxWorld; ++world) {
      INFO(describe(sizes, world));
      auto tensors = metas(sizes);
      zt::ShardPlan plan = strategy->plan(tensors, world);
      CHECK_NOTHROW(zt::validate_plan(plan, tensors, world, "shard_tensor"));
      // One collective per tensor, empty tensors included, in input order.
      REQUIRE(plan.groups.size() == sizes.size());
      for (size_t g = 0; g < plan.groups.size(); ++g) {
        const zt::FlatGroup& group = plan.groups[g];
        REQUIRE(group.segments.size() == 1);
        CHECK(group.segments[0].tensor == static_cast<int>(g));
        CHECK(group.segments[0].flat_offset == 0);
        CHECK(group.numel == sizes[g]);
        CHECK(group.padded_numel % world == 0);
        CHECK(group.padded_numel >= group.numel);
        CHECK(group.padded_numel - group.numel < world);
        // Each rank's shard is ceil(numel / world): the smallest equal split that covers it.
        CHECK(group.padded_numel / world == (sizes[g] + world - 1) / world);
      }
    }
  }
}

TEST_CASE("with one rank nothing is padded, and the element size does not change the layout") {
  auto strategy = make_strategy();
  std::vector<int64_t> sizes = {3, 0, 17, 1};
  zt::ShardPlan one = strategy->plan(metas(sizes), 1);
  for (size_t g = 0; g < sizes.size(); ++g) CHECK(one.groups[g].padded_numel == sizes[g]);
  // Element size only matters for byte-sized buckets; per-tensor groups ignore it.
  zt::ShardPlan fp32 = strategy->plan(metas(sizes, 4), 5);
  zt::ShardPlan bf16 = strategy->plan(metas(sizes, 2), 5);
  REQUIRE(fp32.groups.size() == bf16.groups.size());
  for (size_t g = 0; g < fp32.groups.size(); ++g) {
    CHECK(fp32.groups[g].padded_numel == bf16.groups[g].padded_numel);
  }
}

TEST_CASE("an engine passing a bad world size or a negative numel gets an InternalError") {
  auto strategy = make_strategy();
  CHECK_THROWS_AS(strategy->plan(metas({4}), 0), zt::InternalError);
  CHECK_THROWS_AS(strategy->plan(metas({4}), -2), zt::InternalError);
  CHECK_THROWS_AS(strategy->plan(metas({4, -1}), 2), zt::InternalError);
  CHECK(strategy->plan({}, 3).groups.empty());
}

TEST_CASE("validate_plan refuses a group with a negative size or a segment before its start") {
  // A third-party strategy's bug: -4 % 2 == 0 passed the padding rule, and LibTorch's own error
  // about a negative dimension came later, naming no unit.
  zt::ShardPlan plan;
  plan.groups.push_back({});
  plan.groups[0].numel = -4;
  plan.groups[0].padded_numel = -4;
  CHECK_THROWS_WITH_AS(zt::validate_plan(plan, metas({}), 2, "shard_buggy"),
                       doctest::Contains("group 0 has a negative element count"),
                       zt::InternalError);
  plan = make_strategy()->plan(metas({4}), 2);
  plan.groups[0].segments[0].flat_offset = -2;
  CHECK_THROWS_WITH_AS(zt::validate_plan(plan, metas({4}), 2, "shard_buggy"),
                       doctest::Contains("starts before it"), zt::InternalError);
}
