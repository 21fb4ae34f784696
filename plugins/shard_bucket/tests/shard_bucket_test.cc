// shard_bucket: a unit's tensors flattened into one group, or packed in order into buckets of at
// most bucket_mb MiB. The plugin is loaded the way the engine loads it (PluginCatalog, from the
// build tree's lib/zt/plugins); its plans are checked for layout properties over world sizes
// 1..7, several bucket sizes and alignments, and hand-picked plus seeded random tensor lists.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "zt/bytes.h"
#include "zt/error.h"
#include "zt/host/plugin_loader.h"
#include "zt/options.h"
#include "zt/shard_strategy.h"

namespace {

constexpr int kMaxWorld = 7;
constexpr int64_t kMiB = 1024 * 1024;

// One catalog for the whole run: plugin libraries stay loaded for the life of the process anyway.
zt::PluginCatalog& catalog() {
  static zt::PluginCatalog instance;
  return instance;
}

std::unique_ptr<zt::ShardStrategy> make_strategy(const std::string& id,
                                                 std::map<std::string, zt::Value> values = {}) {
  const zt::ShardStrategyPlugin& factory = catalog().shard(id);
  return factory.create(zt::Options("plugin." + id, factory.options(), std::move(values), {}));
}

std::unique_ptr<zt::ShardStrategy> make_bucket(double bucket_mb, int64_t align = 1) {
  return make_strategy("shard_bucket", {{"bucket_mb", bucket_mb}, {"align", align}});
}

std::vector<zt::TensorMeta> metas(const std::vector<int64_t>& sizes, int64_t element_size = 4) {
  std::vector<zt::TensorMeta> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({"t" + std::to_string(i), sizes[i], element_size});
  }
  return out;
}

// Edge cases (empty unit, empty tensors, single elements, primes, a huge tensor, lists that fill
// a 1 MiB fp32 bucket exactly), then seeded random lists mixing fp32 and bf16 element sizes.
std::vector<std::vector<zt::TensorMeta>> tensor_lists() {
  std::vector<std::vector<int64_t>> fixed = {{},
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
                                             {kMiB / 4},
                                             {kMiB / 8, kMiB / 8, 1},
                                             {kMiB / 4 + 1, 0, 3},
                                             {0, kMiB / 4, 0, kMiB / 4}};
  std::vector<std::vector<zt::TensorMeta>> lists;
  for (const auto& sizes : fixed) lists.push_back(metas(sizes));
  std::mt19937_64 rng(20240602);
  for (int k = 0; k < 300; ++k) {
    std::vector<zt::TensorMeta> tensors(rng() % 14);
    for (size_t i = 0; i < tensors.size(); ++i) {
      zt::TensorMeta& t = tensors[i];
      t.name = "r" + std::to_string(k) + "." + std::to_string(i);
      t.element_size = rng() % 3 == 0 ? 2 : 4;
      switch (rng() % 8) {
        case 0: t.numel = 0; break;
        case 1: t.numel = 1; break;
        case 2: t.numel = static_cast<int64_t>(rng() % 2000000); break;   // around a 1 MiB bucket
        case 3: t.numel = static_cast<int64_t>(rng() % 50000000); break;  // far above it
        default: t.numel = static_cast<int64_t>(rng() % 100000);
      }
    }
    lists.push_back(tensors);
  }
  return lists;
}

std::string describe(const std::vector<zt::TensorMeta>& tensors, int world) {
  std::string s = "world=" + std::to_string(world) + " tensors=[";
  for (size_t i = 0; i < tensors.size(); ++i) {
    s += (i ? "," : "") + std::to_string(tensors[i].numel) + "x" +
         std::to_string(tensors[i].element_size);
  }
  return s + "]";
}

// Bytes a tensor adds to a group whose flat buffer currently ends at `end`: its alignment gap
// and its elements.
int64_t added_bytes(const zt::TensorMeta& t, int64_t end, int64_t align) {
  return (zt::round_up(end, align) - end + t.numel) * t.element_size;
}

// Checks every property a bucket plan must have. limit_bytes == 0 means one group per unit.
void check_bucket_plan(const zt::ShardPlan& plan, const std::vector<zt::TensorMeta>& tensors,
                       int world, int64_t limit_bytes, int64_t align) {
  CHECK_NOTHROW(zt::validate_plan(plan, tensors, world, "shard_bucket"));
  // Tensors appear exactly once, in input order, across groups taken in order; no empty groups.
  int next = 0;
  for (const zt::FlatGroup& group : plan.groups) {
    CHECK_FALSE(group.segments.empty());
    for (const zt::FlatSegment& seg : group.segments) CHECK(seg.tensor == next++);
  }
  REQUIRE(next == static_cast<int>(tensors.size()));
  if (limit_bytes == 0) CHECK(plan.groups.size() == (tensors.empty() ? 0u : 1u));

  std::vector<int64_t> group_bytes;
  for (const zt::FlatGroup& group : plan.groups) {
    int64_t end = 0;
    int64_t bytes = 0;
    for (const zt::FlatSegment& seg : group.segments) {
      // Contiguous from 0: each segment starts at the first aligned offset after the last one.
      CHECK(seg.flat_offset == zt::round_up(end, align));
      bytes += added_bytes(tensors[seg.tensor], end, align);
      end = seg.flat_offset + tensors[seg.tensor].numel;
    }
    CHECK(group.numel == end);
    // Tail padding only, to a multiple of world * align (so each rank's shard starts aligned),
    // and never a whole extra row of it.
    CHECK(group.padded_numel % (world * align) == 0);
    CHECK(group.padded_numel >= group.numel);
    CHECK(group.padded_numel - group.numel < world * align);
    // Within the bucket, unless the group is one tensor that alone exceeds it.
    if (limit_bytes > 0 && bytes > limit_bytes) CHECK(group.segments.size() == 1);
    group_bytes.push_back(bytes);
  }
  // Packed greedily: a group was closed only because the next tensor would not fit in it.
  for (size_t g = 0; g + 1 < plan.groups.size(); ++g) {
    const zt::FlatGroup& group = plan.groups[g];
    const zt::TensorMeta& next_tensor = tensors[plan.groups[g + 1].segments.front().tensor];
    CHECK(group_bytes[g] + added_bytes(next_tensor, group.numel, align) > limit_bytes);
  }
}

std::vector<int> tensor_indices(const zt::FlatGroup& group) {
  std::vector<int> out;
  for (const auto& seg : group.segments) out.push_back(seg.tensor);
  return out;
}

}  // namespace

TEST_CASE("the plugin declares bucket_mb (number >= 0, default 0) and align (int >= 1, "
          "default 1)") {
  const zt::PluginRecord& record = catalog().load("shard_bucket");
  CHECK(record.kind == ZT_KIND_SHARD);
  auto specs = catalog().shard("shard_bucket").options();
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].name == "bucket_mb");
  CHECK(specs[0].type == zt::ValueType::kDouble);
  CHECK(std::get<double>(specs[0].default_value) == 0.0);
  REQUIRE(specs[0].min.has_value());
  CHECK(*specs[0].min == 0.0);
  CHECK(specs[0].doc ==
        "0: one flat group per unit; else groups of at most this many MiB (whole tensors; a "
        "larger tensor gets its own group)");
  CHECK(specs[1].name == "align");
  CHECK(specs[1].type == zt::ValueType::kInt);
  CHECK(std::get<int64_t>(specs[1].default_value) == 1);
  // The config loader enforces the declared range before any rank starts.
  CHECK_THROWS_AS(zt::check_option(specs[0], -1.0, "plugin.shard_bucket", {"x.toml", 2, 1}),
                  zt::ConfigError);
}

TEST_CASE("a unit of five tensors: shard_tensor costs five collectives, shard_bucket one") {
  std::vector<int64_t> sizes = {10, 3, 7, 1, 8};
  auto tensors = metas(sizes);
  zt::ShardPlan per_tensor = make_strategy("shard_tensor")->plan(tensors, 4);
  zt::ShardPlan bucketed = make_strategy("shard_bucket")->plan(tensors, 4);  // defaults
  zt::validate_plan(per_tensor, tensors, 4, "shard_tensor");
  zt::validate_plan(bucketed, tensors, 4, "shard_bucket");
  CHECK(per_tensor.groups.size() == 5);
  int64_t per_tensor_total = 0;
  for (const auto& g : per_tensor.groups) per_tensor_total += g.padded_numel;
  CHECK(per_tensor_total == 12 + 4 + 8 + 4 + 8);
  REQUIRE(bucketed.groups.size() == 1);
  CHECK(bucketed.groups[0].numel == 29);
  CHECK(bucketed.groups[0].padded_numel == 32);
  CHECK(tensor_indices(bucketed.groups[0]) == std::vector<int>{0, 1, 2, 3, 4});
  const std::vector<int64_t> offsets = {0, 10, 13, 20, 21};
  for (size_t i = 0; i < 5; ++i) CHECK(bucketed.groups[0].segments[i].flat_offset == offsets[i]);
}

TEST_CASE("bucket_mb = 0: one flat group per unit, contiguous from 0, tail padding only") {
  auto strategy = make_bucket(0.0);
  for (const auto& tensors : tensor_lists()) {
    for (int world = 1; world <= kMaxWorld; ++world) {
      INFO(describe(tensors, world));
      check_bucket_plan(strategy->plan(tensors, world), tensors, world, 0, 1);
    }
  }
}

TEST_CASE("bucket_mb > 0: whole tensors packed in order, no group over the bucket but a lone "
          "larger tensor") {
  for (double bucket_mb : {1.0, 0.25, 3.5, 64.0}) {
    auto strategy = make_bucket(bucket_mb);
    const auto limit = static_cast<int64_t>(bucket_mb * kMiB);
    for (const auto& tensors : tensor_lists()) {
      for (int world = 1; world <= kMaxWorld; ++world) {
        INFO("bucket_mb=" << bucket_mb << " " << describe(tensors, world));
        check_bucket_plan(strategy->plan(tensors, world), tensors, world, limit, 1);
      }
    }
  }
}

TEST_CASE("a bucket filled exactly is kept and one more element opens the next") {
  auto strategy = make_bucket(1.0);
  // Two fp32 tensors of 512 KiB fill 1 MiB exactly; the 1-element tensor goes to a new group.
  zt::ShardPlan exact = strategy->plan(metas({kMiB / 8, kMiB / 8, 1}), 3);
  REQUIRE(exact.groups.size() == 2);
  CHECK(tensor_indices(exact.groups[0]) == std::vector<int>{0, 1});
  CHECK(exact.groups[0].numel == kMiB / 4);
  CHECK(tensor_indices(exact.groups[1]) == std::vector<int>{2});
  // One element over: the second tensor no longer fits with the first.
  zt::ShardPlan over = strategy->plan(metas({kMiB / 8, kMiB / 8 + 1}), 3);
  REQUIRE(over.groups.size() == 2);
  CHECK(over.groups[1].segments[0].flat_offset == 0);
  // The same element counts in bf16 take half the bytes, so they share one bucket.
  CHECK(strategy->plan(metas({kMiB / 8, kMiB / 8 + 1}, 2), 3).groups.size() == 1);
  // An empty tensor adds no bytes: it joins a full bucket rather than opening a group.
  CHECK(strategy->plan(metas({kMiB / 4, 0}), 2).groups.size() == 1);
}

TEST_CASE("a tensor larger than the bucket is alone in its group, neighbours packed around it") {
  auto strategy = make_bucket(1.0);
  zt::ShardPlan plan = strategy->plan(metas({10, 10, 300000, 10, 0, 10}), 4);
  check_bucket_plan(plan, metas({10, 10, 300000, 10, 0, 10}), 4, kMiB, 1);
  REQUIRE(plan.groups.size() == 3);
  CHECK(tensor_indices(plan.groups[0]) == std::vector<int>{0, 1});
  CHECK(tensor_indices(plan.groups[1]) == std::vector<int>{2});
  CHECK(plan.groups[1].padded_numel == 300000);
  CHECK(tensor_indices(plan.groups[2]) == std::vector<int>{3, 4, 5});
  CHECK(plan.groups[2].padded_numel == 20);
}

TEST_CASE("a tiny positive bucket means one tensor per group, never one group per unit") {
  auto strategy = make_bucket(1e-9);
  std::vector<int64_t> sizes = {2, 1, 3, 5};
  zt::ShardPlan plan = strategy->plan(metas(sizes), 2);
  check_bucket_plan(plan, metas(sizes), 2, 1, 1);
  CHECK(plan.groups.size() == 4);
}

TEST_CASE("align: segments and every rank's shard start on multiples of align") {
  SUBCASE("a worked example") {
    auto strategy = make_bucket(0.0, 4);
    zt::ShardPlan plan = strategy->plan(metas({3, 5, 1}), 3);
    REQUIRE(plan.groups.size() == 1);
    const auto& segs = plan.groups[0].segments;
    REQUIRE(segs.size() == 3);
    CHECK(segs[0].flat_offset == 0);
    CHECK(segs[1].flat_offset == 4);
    CHECK(segs[2].flat_offset == 12);
    CHECK(plan.groups[0].numel == 13);
    CHECK(plan.groups[0].padded_numel == 24);  // shards of 8 elements, each aligned
  }
  SUBCASE("alignment gaps count towards the bucket") {
    // 64 fp32 elements = 256 bytes; with align 16 the 1-element tensors take 64 bytes each.
    auto strategy = make_bucket(256.0 / kMiB, 16);
    zt::ShardPlan plan = strategy->plan(metas({1, 1, 1, 1, 1}), 1);
    check_bucket_plan(plan, metas({1, 1, 1, 1, 1}), 1, 256, 16);
    REQUIRE(plan.groups.size() == 2);
    CHECK(tensor_indices(plan.groups[0]) == std::vector<int>{0, 1, 2, 3});
  }
  SUBCASE("properties over every list, world and bucket") {
    for (int64_t align : {4, 16}) {
      for (double bucket_mb : {0.0, 1.0}) {
        auto strategy = make_bucket(bucket_mb, align);
        const auto limit = static_cast<int64_t>(bucket_mb * kMiB);
        for (const auto& tensors : tensor_lists()) {
          for (int world = 1; world <= kMaxWorld; ++world) {
            INFO("align=" << align << " bucket_mb=" << bucket_mb << " "
                          << describe(tensors, world));
            check_bucket_plan(strategy->plan(tensors, world), tensors, world, limit, align);
          }
        }
      }
    }
  }
}

TEST_CASE("options the config loader did not check are refused with a ConfigError") {
  const zt::ShardStrategyPlugin& factory = catalog().shard("shard_bucket");
  auto create = [&](std::map<std::string, zt::Value> values) {
    return factory.create(zt::Options("plugin.shard_bucket", factory.options(), std::move(values),
                                      {{"bucket_mb", zt::SourceLocation{"job.toml", 7, 1}}}));
  };
  try {
    create({{"bucket_mb", -1.0}});
    FAIL("expected ConfigError");
  } catch (const zt::ConfigError& e) {
    CHECK(std::string(e.what()).find("job.toml:7:1") != std::string::npos);
    CHECK(std::string(e.what()).find("plugin.shard_bucket.bucket_mb") != std::string::npos);
  }
  CHECK_THROWS_AS(create({{"bucket_mb", std::nan("")}}), zt::ConfigError);
  CHECK_THROWS_AS(create({{"align", int64_t{0}}}), zt::ConfigError);
}

TEST_CASE("an engine passing a bad world size or tensor meta gets an InternalError") {
  auto strategy = make_bucket(1.0);
  CHECK_THROWS_AS(strategy->plan(metas({4}), 0), zt::InternalError);
  CHECK_THROWS_AS(strategy->plan(metas({4, -1}), 2), zt::InternalError);
  CHECK_THROWS_AS(strategy->plan(metas({4}, 0), 2), zt::InternalError);
  CHECK(strategy->plan({}, 3).groups.empty());
}
