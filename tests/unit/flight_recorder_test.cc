// The flight recorder (zt/host/flight_recorder.h) and its diagnosis (zt/host/flight_diagnosis.h):
// ops are recorded through an observed communicator with their state, the ring keeps the newest,
// the dump is JSON, and the diagnosis names the rank that waits, the op and its sequence number,
// the rank behind it and what that one does, or the first op the ranks disagree on.
#include <doctest/doctest.h>
#include <filesystem>

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "solo_communicator.h"
#include "zt/communicator.h"
#include "zt/error.h"
#include "zt/host/flight_diagnosis.h"
#include "zt/host/flight_recorder.h"
#include "zt/host/trace.h"

using zt::test::contains;
using zt::test::SoloCommunicator;
using zt::test::TempDir;
using zt::test::write_file;

namespace {

// A world of one whose all_reduce has failed by the time anyone waits for it (a size mismatch,
// a peer already found dead), and whose broadcast is refused at the call (as a plugin refuses a
// dtype it lacks).
class FailedCommunicator final : public zt::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "failed"; }
  std::shared_ptr<zt::Work> all_gather(const at::Tensor&, const at::Tensor&) override {
    return std::make_shared<zt::CompletedWork>();
  }
  std::shared_ptr<zt::Work> reduce_scatter(const at::Tensor&, const at::Tensor&,
                                           zt::ReduceOp) override {
    return std::make_shared<zt::CompletedWork>();
  }
  std::shared_ptr<zt::Work> all_reduce(const at::Tensor&, zt::ReduceOp) override {
    return zt::run_now([] { throw zt::CommError("peer 1 is gone"); });
  }
  std::shared_ptr<zt::Work> broadcast(const at::Tensor&, int) override {
    throw zt::InternalError("failed: broadcast refused at the call");
  }
  std::shared_ptr<zt::Work> barrier() override { return std::make_shared<zt::CompletedWork>(); }
  zt::CommStats stats() const override { return {}; }
  std::unique_ptr<zt::Communicator> split(int, int) override {
    return std::make_unique<FailedCommunicator>();
  }
};

// One rank's flight file as the recorder writes it, reduced to what the diagnosis reads.
std::string rank_file(int rank, const std::string& waiting, const std::string& doing,
                      const std::vector<std::string>& ops) {
  std::string s = "{\"rank\":" + std::to_string(rank) +
                  ",\"now_us\":40000000,\"threads\":[{\"lane\":\"compute\",\"stack\":[\"step 3\"," +
                  zt::trace::json_quote(doing) + "],\"waiting\":" + zt::trace::json_quote(waiting) +
                  ",\"waiting_since_us\":10000000}],\"collectives\":[";
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? "," : "") + ops[i];
  return s + "]}";
}

std::string op(int seq, const std::string& name, int64_t bytes, const std::string& phase,
               const std::string& state) {
  return "{\"seq\":" + std::to_string(seq) + ",\"group\":\"world\",\"op\":\"" + name +
         "\",\"bytes\":" + std::to_string(bytes) + ",\"dtype\":\"Float\",\"phase\":\"" + phase +
         "\",\"state\":\"" + state + "\"}";
}

}  // namespace

TEST_CASE("flight recorder: an observed communicator records each op with its phase and state") {
  auto& recorder = zt::FlightRecorder::instance();
  const size_t before = recorder.records().size();
  auto comm = zt::observe_communicator(std::make_unique<SoloCommunicator>(), "world");
  at::Tensor t = at::ones({1024});
  {
    const zt::trace::Scope unit("unit", 4, "forward", zt::trace::kCompute);
    comm->all_gather(t, t)->wait();
  }
  comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
  const auto records = recorder.records();
  REQUIRE(records.size() == before + 2);
  const zt::CollectiveRecord& gather = records[records.size() - 2];
  CHECK(gather.op == "all_gather");
  CHECK(gather.bytes == 4096);
  CHECK(gather.dtype == "Float");
  CHECK(gather.phase == "unit 4 forward");
  CHECK(gather.group == "world");
  CHECK(gather.completed_ns >= gather.issued_ns);
  CHECK(records.back().seq == gather.seq + 1);

  TempDir dir;
  recorder.set_dump_path(dir.file("flight/rank-0.json"), 0, 1);
  REQUIRE(recorder.dump("test"));
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("flight/rank-0.json")));
  CHECK(j["reason"] == "test");
  CHECK(j["collectives"].back()["state"] == "done");
  // The next run at that path (a job requeued into the same out_dir) starts without it: a rank
  // that then hangs where it cannot dump leaves no earlier job's record to be read as its own.
  recorder.set_dump_path(dir.file("flight/rank-0.json"), 0, 1);
  CHECK_FALSE(std::filesystem::exists(dir.file("flight/rank-0.json")));
  recorder.set_dump_path("", 0, 1);
}

TEST_CASE("flight recorder: the ring keeps the newest collectives") {
  auto& recorder = zt::FlightRecorder::instance();
  recorder.set_capacity(16);
  auto comm = zt::observe_communicator(std::make_unique<SoloCommunicator>(), "ring");
  at::Tensor t = at::ones({4});
  for (int i = 0; i < 100; ++i) comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
  // Exactly the last 16 (every rank's dump covers the same stretch of sequence numbers), not
  // what is left after the oldest half was dropped.
  const auto records = recorder.records();
  REQUIRE(records.size() == 16);
  for (size_t i = 0; i < records.size(); ++i) CHECK(records[i].seq == 85 + int64_t(i));
  CHECK(records.back().group == "ring");
  recorder.set_capacity(4096);
}

TEST_CASE("flight diagnosis: the waiting rank, its op and sequence number, and the rank behind") {
  TempDir dir;
  write_file(dir.file("rank-0.json"),
             rank_file(0, "", "offload read of optim.exp_avg (4.0 MiB, offload_nvme)",
                       {op(811, "all_gather", 6291456, "unit 2 forward", "done")}));
  write_file(dir.file("rank-1.json"),
             rank_file(1, "all_gather #812 (6.0 MiB, unit 3 forward) on world", "comm wait",
                       {op(811, "all_gather", 6291456, "unit 2 forward", "done"),
                        op(812, "all_gather", 6291456, "unit 3 forward", "running")}));
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 2);
  const std::string& line = d.line;
  INFO(line);
  CHECK(d.found);
  CHECK(contains(line, "rank 1 waits in all_gather #812 (6.0 MiB, unit 3 forward) on world since "
                       "30.0 s"));
  CHECK(contains(line, "rank 0's last completed is #811"));
  CHECK(contains(line, "it is in offload read of optim.exp_avg"));
}

TEST_CASE("flight diagnosis: ranks that all reached the waited collective are not blamed") {
  // Rank 2 was killed without a record; ranks 0 and 1 both wait in #24: neither holds the other
  // back, and the line points at the rank without a record.
  TempDir dir;
  for (int r = 0; r < 2; ++r) {
    write_file(dir.file("rank-" + std::to_string(r) + ".json"),
               rank_file(r, "all_gather #24 (2.0 KiB, unit 1 forward) on world", "comm wait",
                         {op(23, "all_gather", 2048, "unit 0 forward", "done"),
                          op(24, "all_gather", 2048, "unit 1 forward", "running")}));
  }
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 3);
  INFO(d.line);
  CHECK(d.found);
  CHECK_FALSE(contains(d.line, "last completed is #23"));
  CHECK(contains(d.line, "every rank with a record reached #24"));
  CHECK(contains(d.line, "rank 2 left no flight record"));
}

TEST_CASE("flight diagnosis: with a rank gone without a record, a live rank behind is not blamed") {
  // Rank 2 was killed outright; the launcher stopped the others at once: rank 1 was still
  // computing (last issued #23) while rank 0 waited in #24. Rank 1 was named as the one
  // holding rank 0 back.
  TempDir dir;
  write_file(dir.file("rank-0.json"),
             rank_file(0, "all_gather #24 (2.0 KiB, unit 1 forward) on world", "comm wait",
                       {op(23, "all_gather", 2048, "unit 0 forward", "done"),
                        op(24, "all_gather", 2048, "unit 1 forward", "running")}));
  write_file(
      dir.file("rank-1.json"),
      rank_file(1, "", "unit 0 forward", {op(23, "all_gather", 2048, "unit 0 forward", "done")}));
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 3);
  INFO(d.line);
  CHECK(d.found);
  CHECK(contains(d.line, "rank 0 waits in all_gather #24"));
  CHECK_FALSE(contains(d.line, "rank 1's last completed"));
  CHECK(contains(d.line, "the rank(s) that left no record (below) are the first to look at"));
  CHECK(contains(d.line, "rank 2 left no flight record"));
}

TEST_CASE("flight diagnosis: a wait in a split group names no rank behind by job-wide numbers") {
  // A MiCS shard group's numbers count apart: the lowest job-wide last_issued says nothing of
  // who holds the group back.
  TempDir dir;
  write_file(dir.file("rank-0.json"),
             rank_file(0, "all_gather #5 (2.0 KiB, unit 1 forward) on world.split1(color 0)",
                       "comm wait", {op(30, "all_reduce", 8, "step", "done")}));
  write_file(dir.file("rank-1.json"),
             rank_file(1, "", "unit 1 forward", {op(29, "all_reduce", 8, "step", "done")}));
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 2);
  INFO(d.line);
  CHECK(d.found);
  CHECK(contains(d.line, "rank 0 waits in all_gather #5"));
  CHECK_FALSE(contains(d.line, "rank 1's last completed"));
}

TEST_CASE("flight diagnosis: ranks that wait in nothing are described, not diagnosed") {
  TempDir dir;
  for (int r = 0; r < 2; ++r) {
    write_file(dir.file("rank-" + std::to_string(r) + ".json"),
               rank_file(r, "", "unit 1 forward", {op(7, "all_gather", 2048, "step", "done")}));
  }
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 2);
  INFO(d.line);
  CHECK_FALSE(d.found);
  CHECK(contains(d.line, "rank 1's last completed collective is #7 and it is in unit 1 forward"));
}

TEST_CASE("flight diagnosis: the first collective the ranks disagree on, and missing ranks") {
  TempDir dir;
  write_file(dir.file("rank-0.json"),
             rank_file(0, "all_reduce #25 (8 B, step 1) on world", "comm wait",
                       {op(24, "all_gather", 2048, "step", "done"),
                        op(25, "all_reduce", 8, "step 1", "running")}));
  write_file(dir.file("rank-1.json"), rank_file(1, "", "",
                                                {op(24, "all_gather", 2048, "step", "done"),
                                                 op(25, "all_gather", 192, "", "running")}));
  const zt::FlightDiagnosis d = zt::diagnose_flight(dir.path(), 3);
  const std::string& line = d.line;
  INFO(line);
  CHECK(d.found);
  CHECK(contains(line, "differ at #25 on world: rank 0 issued all_reduce #25 (8 B Float, step 1), "
                       "rank 1 issued all_gather #25 (192 B Float)"));
  CHECK(contains(line, "rank 2 left no flight record"));
  CHECK(zt::diagnose_flight(dir.file("nothing-here"), 2).line.empty());
}

// Last in this file: a failure's dump is once per process.
TEST_CASE("flight recorder: a failure's dump and SIGUSR2's at once leave the failure's, whole") {
  auto& recorder = zt::FlightRecorder::instance();
  auto comm = zt::observe_communicator(std::make_unique<SoloCommunicator>(), "dumps");
  at::Tensor t = at::ones({4});
  for (int i = 0; i < 2000; ++i) comm->all_reduce(t, zt::ReduceOp::kSum)->wait();
  TempDir dir;
  recorder.set_dump_path(dir.file("flight/rank-0.json"), 0, 1);
  std::atomic<bool> stop{false};
  std::thread requests([&] {
    while (!stop.load()) recorder.dump_on_request();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(recorder.dump_failure("comm error: the peer died"));
  stop = true;
  requests.join();
  // Both wrote one temporary file each time; interleaved, the two made invalid JSON, or the
  // request's rename came last and replaced the failure's dump.
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("flight/rank-0.json")));
  CHECK(j["reason"] == "comm error: the peer died");
  CHECK_FALSE(recorder.dump_on_request());
  recorder.set_dump_path("", 0, 1);
}

TEST_CASE("flight recorder: a collective that failed before its wait dumps where it waited") {
  // The wait finds the op already ended, with an error: the dump was left to main() after the
  // stack unwound, with no `waiting` and the op still "running".
  auto& recorder = zt::FlightRecorder::instance();
  auto comm = zt::observe_communicator(std::make_unique<FailedCommunicator>(), "failing");
  TempDir dir;
  recorder.set_dump_path(dir.file("flight/rank-0.json"), 0, 1);
  at::Tensor t = at::ones({4});
  CHECK_THROWS_AS(comm->all_reduce(t, zt::ReduceOp::kSum)->wait(), zt::CommError);
  const auto j = nlohmann::json::parse(zt::test::read_file(dir.file("flight/rank-0.json")));
  recorder.set_dump_path("", 0, 1);
  CHECK(contains(j["reason"].get<std::string>(), "peer 1 is gone"));
  bool waiting_named = false;
  for (const auto& thread : j["threads"]) {
    const std::string w = thread.value("waiting", "");
    waiting_named = waiting_named || (contains(w, "all_reduce #") && contains(w, "on failing"));
  }
  CHECK(waiting_named);
  CHECK(j["collectives"].back()["state"] == "failed");
}

TEST_CASE("flight recorder: a collective refused at the call is recorded as failed, not running") {
  // Left "running", the refusing rank read in the diagnosis as waiting in it with its peers.
  auto& recorder = zt::FlightRecorder::instance();
  auto comm = zt::observe_communicator(std::make_unique<FailedCommunicator>(), "refusing");
  at::Tensor t = at::ones({4});
  CHECK_THROWS_AS(comm->broadcast(t, 0), zt::InternalError);
  const auto records = recorder.records();
  REQUIRE(!records.empty());
  CHECK(records.back().op == "broadcast");
  CHECK(records.back().group == "refusing");
  CHECK(records.back().failed);
  CHECK(records.back().completed_ns != 0);
}
