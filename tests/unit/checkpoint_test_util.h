// What the checkpoint tests share: a small model whose every element's value is a function of
// (tensor, kind, element, step), ranks as threads of this process (each with its own client of
// a real TCPStore), and a fill that feeds a CheckpointRankWriter as the engine does (a 1/world
// split of every tensor, "exp_avg_sq" streamed tile by tile, the rest from memory the caller
// scribbles over right after each write, as the next step would).
#pragma once

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_saver.h"
#include "zt/host/checkpoint.h"
#include "zt/host/launcher.h"
#include "zt/host/rendezvous.h"

namespace zt::test {

inline const std::vector<CheckpointTensor>& model_tensors() {
  static const std::vector<CheckpointTensor> kTensors = {{"embed.weight", {5, 7}},
                                                         {"block0.bias", {13}},
                                                         {"block0.weight", {2, 3, 4}},
                                                         {"scale", {}},
                                                         {"unused", {0}}};
  return kTensors;
}

inline const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> kKinds = {"param", "exp_avg", "exp_avg_sq"};
  return kKinds;
}

// Exact in fp32 (small integers plus halves), distinct across tensors, kinds and steps.
inline float model_value(size_t tensor, size_t kind, int64_t element, int64_t step) {
  return static_cast<float>(tensor * 1000 + kind * 100 + element) * 0.5f + static_cast<float>(step);
}

// Elements [begin, end) of `numel` that rank `rank` of `world` owns (the last ranks may own none).
inline std::pair<int64_t, int64_t> owned(int64_t numel, int rank, int world) {
  const int64_t per = (numel + world - 1) / world;
  return {std::min(numel, per * rank), std::min(numel, per * (rank + 1))};
}

inline EngineCounters counters_at(int64_t step) {
  EngineCounters c{step, 512.0 * static_cast<double>(step) + 0.25, step % 3, 2};
  c.unscalable_in_a_row = step % 2;
  return c;
}

// Feeds this rank's part of the model at `step` in parts of `tile` elements.
inline CheckpointSaverAccess::Fill model_fill(int rank, int world, int64_t step, int64_t tile = 3) {
  return [=](CheckpointRankWriter& w) {
    const auto& tensors = model_tensors();
    for (const auto& t : tensors) w.add_tensor(t);
    struct Declared {
      size_t tensor, kind;
      int64_t begin, end, index;
    };
    std::vector<Declared> declared;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const auto [begin, end] = owned(tensors[t].numel(), rank, world);
      if (begin == end) continue;
      for (size_t k = 0; k < model_kinds().size(); ++k) {
        const bool streamed = model_kinds()[k] == "exp_avg_sq";
        int64_t index = w.declare({tensors[t].name, model_kinds()[k], begin, end}, streamed);
        declared.push_back({t, k, begin, end, index});
      }
    }
    w.begin_data();
    std::vector<float> source(static_cast<size_t>(tile));
    for (const auto& d : declared) {
      for (int64_t at = d.begin; at < d.end; at += tile) {
        const int64_t n = std::min(tile, d.end - at);
        for (int64_t i = 0; i < n; ++i) source[i] = model_value(d.tensor, d.kind, at + i, step);
        w.write(d.index, at - d.begin, source.data(), n);
        std::fill(source.begin(), source.end(), -1e30f);  // the next step changes the memory
      }
    }
    w.set_counters(counters_at(step));
  };
}

inline CheckpointMeta model_meta(int64_t step) {
  CheckpointMeta meta;
  meta.trainer_state = R"({"step":)" + std::to_string(step) + R"(,"data":{"position":42}})";
  meta.config_toml = "[model]\nkind = \"gpt\"\n";
  meta.saved_by = "world 3, stage 2, shard_tensor, offload none, fp32";
  return meta;
}

// Whether something accepts connections on 127.0.0.1:port.
inline bool listening(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// One store client per rank, all connected to rank 0's TCPStore.
inline std::vector<std::unique_ptr<Store>> make_stores(int world) {
  const int port = pick_free_port("127.0.0.1");
  std::vector<std::unique_ptr<Store>> stores(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    // c10d's client retries a refused connection only after a second: let rank 0 listen first.
    for (int i = 0; r == 1 && i < 5000 && !listening(port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    threads.emplace_back([&, r] {
      stores[static_cast<size_t>(r)] = rendezvous("127.0.0.1", port, r, world,
                                                  std::chrono::seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  return stores;
}

// Runs body(rank) on `world` threads; returns each rank's exception (null when it returned).
inline std::vector<std::exception_ptr> run_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline std::string message(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
  return "?";
}

inline void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) REQUIRE_MESSAGE(!errors[r], message(errors[r]));
}

inline CheckpointOptions options_for(const std::filesystem::path& dir, bool async,
                                     int64_t keep_last = 2) {
  CheckpointOptions o;
  o.dir = dir.string();
  o.async = async;
  o.keep_last = keep_last;
  o.timeout = std::chrono::seconds(30);
  o.job = "test-job";
  return o;
}

// Every rank saves the model at each of `steps` with one saver each, then finishes; a step in
// `val_loss` records that value as the metric "val_loss".
inline void save_steps(const CheckpointOptions& options, int world,
                       const std::vector<int64_t>& steps,
                       const std::map<int64_t, double>& val_loss = {}) {
  auto stores = make_stores(world);
  require_no_errors(run_ranks(world, [&](int r) {
    CheckpointSaver saver(options, *stores[static_cast<size_t>(r)], r, world);
    for (int64_t step : steps) {
      CheckpointMeta meta = model_meta(step);
      if (val_loss.count(step)) meta.metrics["val_loss"] = val_loss.at(step);
      CheckpointSaverAccess::save(saver, model_fill(r, world, step), step, meta);
    }
    saver.finish();
  }));
}

inline std::string rank_file(int rank, int world) { return ckpt::rank_file_name(rank, world); }

// Steps of the complete checkpoints under `dir`, oldest first.
inline std::vector<int64_t> complete_steps(const std::filesystem::path& dir) {
  std::vector<int64_t> steps;
  for (const auto& [step, path] : ckpt::complete_checkpoints(dir.string())) steps.push_back(step);
  return steps;
}

// zlib's crc32 of `text` (what checkpoint files record).
inline uint32_t crc32_of(const std::string& text) {
  return static_cast<uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
}

// Flips one byte of `path` at `offset`.
inline void flip_byte(const std::filesystem::path& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
}

}  // namespace zt::test
