// The engine's half of a job's settings: the sections the core declares ([zero], [precision],
// [plugins], [launch]) read once from a validated config, next to the schema that declares them,
// and passed down as values. The composition (zt/host/compose.h), the memory-fit check, the
// estimates and the launcher take these, never the config. Plugin tables are copied, so settings
// (and what is composed from them) outlive the Config they came from. A program adds its own
// sections' settings beside these (the trainer's JobSettings).
// Thread safety: plain values; of() reads the config only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "zt/api.h"
#include "zt/host/engine_types.h"
#include "zt/options.h"

namespace zt {

class Config;

// Where each key of some sections was set, for the messages that name the knob to turn:
// "job.toml:12:9", "--set zero.stage=2" or "default". Keys are spelled "section.key".
class ZT_API KeyPlaces {
 public:
  // Every key `section` declares, with its place.
  void add(const Options& section);
  // Whether the file, a --set or another source gave the key (not its default).
  bool is_set(const std::string& key) const;
  // "job.toml:12:9"; "default" for a key no source gave. Throws InternalError for a key of no
  // section added (a bug: the schema fixes the names).
  std::string where(const std::string& key) const;
  // "zero.stage (job.toml:12:9)"
  std::string key_at(const std::string& key) const;

 private:
  struct Place {
    std::string where;
    bool set = false;
  };
  std::map<std::string, Place> places_;
};

// A plugin chosen for a role in [plugins], with its validated [plugin.<id>] table.
struct PluginChoice {
  std::string key;  // "plugins.comm"
  std::string id;   // "" when the role is left empty
  Options options;  // a copy: defaults where the file has no table
  bool chosen() const { return !id.empty(); }
  // Whether the plugin declares an option of this name and, where given, of this type (a string
  // `path` makes an offload tier one of files: zt/offload.h's folder convention). A convention
  // read by name alone met a third party's option of another type with an internal error.
  ZT_API bool declares(const std::string& option,
                       std::optional<ValueType> type = std::nullopt) const;
};

// [launch]: how ranks start and meet.
struct LaunchSettings {
  int nproc = 1;       // local ranks the trainer spawns when no launcher environment is set
  std::string device;  // "cpu" | "cuda"
  int64_t max_restarts = 0;
  std::string master_addr;
  int master_port = 0;  // 0: a free one (a job of one process, or zt's own launcher)
  std::chrono::milliseconds timeout{0};  // the bound on every wait
  bool check_collectives = false;
  int64_t flight_records = 0;
  double memory_limit_gb = 0;  // 0: the host's (or its memory cgroup's) room
};

// [zero] mics_shard_size (or its other name shard_group_size), as asked: resolved against the
// world in zt/host/compose.h's shard_groups().
struct ShardGroupRequest {
  int64_t size = -1;          // -1 = every rank; 0 = the ranks of one host; else that many
  std::string key;            // "zero.mics_shard_size" or "zero.shard_group_size"
  bool hierarchical = false;  // mics_hierarchical_params_gather
};

struct EngineSettings {
  // [zero] and [precision]. grad_accum and activation_checkpointing come from the program's
  // own sections ([data], [model] in the trainer), which set them after of().
  EngineOptions options;
  std::string compute;  // "fp32" | "bf16" | "fp16", as configs spell it
  // [plugins], each with its table. When plugins.shard is empty (stage 0, or a run that trains
  // nothing), shard is shard_bucket standing in with its defaults, which the composition reads
  // from the plugin (stage 0 needs a layout, never a shard): shard_stands_in says so.
  PluginChoice comm, shard, optimizer, offload_optimizer, offload_param, model;
  // The codecs of stage 3's parameter gather and of the gradient reduce-scatter, each with its
  // role's table ([codec.weights], [codec.gradients]) as options.
  PluginChoice codec_weights, codec_gradients;
  bool codecs_across_hosts_only = false;  // zero.codec_scope = "across_hosts"
  bool shard_stands_in = false;
  ShardGroupRequest groups;
  LaunchSettings launch;
  KeyPlaces places;  // every key of [zero], [precision], [plugins] and [launch]

  // Reads a validated config (it never throws for one: the schema checked every value).
  ZT_API static EngineSettings of(const Config& config);
};

}  // namespace zt
