#include "run/checkpointing.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/data_source.h"
#include "models/model.h"
#include "run/rank0_step.h"
#include "settings/job_config.h"
#include "zt/error.h"
#include "zt/host/file_io_deadline.h"
#include "zt/host/json_numbers.h"
#include "zt/host/rank_agreement.h"
#include "zt/host/trace.h"

namespace zt::trainer {

namespace {

using nlohmann::json;

const char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

json schedule_json(const Schedule& s) {
  return {{"kind", s.kind},
          {"base_lr", s.base_lr},
          {"warmup_steps", s.warmup_steps},
          {"total_steps", s.total_steps},
          {"min_lr_ratio", s.min_lr_ratio},
          {"warmup_type", s.warmup_type},
          {"warmup_min_ratio", s.warmup_min_ratio}};
}

Schedule schedule_from_json(const json& j) {
  Schedule s;
  s.kind = j.at("kind").get<std::string>();
  s.base_lr = j.at("base_lr").get<double>();
  s.warmup_steps = j.at("warmup_steps").get<int64_t>();
  s.total_steps = j.at("total_steps").get<int64_t>();
  s.min_lr_ratio = j.at("min_lr_ratio").get<double>();
  // Checkpoints from before these existed warmed up linearly from 0.
  s.warmup_type = j.value("warmup_type", std::string("linear"));
  s.warmup_min_ratio = j.value("warmup_min_ratio", 0.0);
  return s;
}

std::string schedule_text(const Schedule& s) {
  std::ostringstream out;
  out << s.kind << " lr " << s.base_lr << ", warm-up " << s.warmup_steps << ", " << s.total_steps
      << " steps";
  return out.str();
}

bool same_schedule(const Schedule& a, const Schedule& b) {
  return a.kind == b.kind && a.base_lr == b.base_lr && a.warmup_steps == b.warmup_steps &&
         a.total_steps == b.total_steps && a.min_lr_ratio == b.min_lr_ratio &&
         a.warmup_type == b.warmup_type && a.warmup_min_ratio == b.warmup_min_ratio;
}

}  // namespace

std::string TrainerState::to_json() const {
  json files = json::array();
  for (const DataFile& f : data_files)
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"modified_ns", f.modified_ns},
                     {"edges_fnv1a", f.edges}});
  json j = {{"step", step},
            {"next_sample", next_sample},
            {"samples_per_step", samples_per_step},
            {"data",
             {{"kind", data_kind},
              {"path", data_path},
              {"seed", data_seed},
              {"held_out_split", data_split},
              {"files", files}}},
            {"lr_schedule", schedule_json(schedule)},
            {"next_lr", next_lr},
            {"cpu_rng_state", rng_state},
            {"zt_version", zt_version}};
  return j.dump();
}

namespace {

// A count of the trainer state (json_count): a float, or a negative or huge number, is refused
// here (a negative sample position failed later as an internal error).
int64_t count_in(const json& j, const char* key, const std::string& folder) {
  const std::optional<int64_t> n = json_count(j.at(key));
  if (!n) {
    throw ConfigError("checkpoint " + folder + ": its trainer state's \"" + key + "\" is " +
                      j.at(key).dump() +
                      ", not a count from 0 to 2^62; the checkpoint is damaged: resume from an "
                      "older one");
  }
  return *n;
}

}  // namespace

TrainerState TrainerState::from_json(const std::string& text, const std::string& folder) {
  try {
    const json j = json::parse(text);
    TrainerState s;
    s.step = count_in(j, "step", folder);
    s.next_sample = count_in(j, "next_sample", folder);
    s.samples_per_step = count_in(j, "samples_per_step", folder);
    s.data_kind = j.at("data").at("kind").get<std::string>();
    s.data_path = j.at("data").at("path").get<std::string>();
    s.data_seed = j.at("data").at("seed").get<uint64_t>();
    s.data_split_recorded = j.at("data").contains("held_out_split");  // zt before 2026-12-04: not
    s.data_split = j.at("data").value("held_out_split", "");
    for (const json& f : j.at("data").value("files", json::array())) {
      s.data_files.push_back({f.at("path").get<std::string>(), f.at("bytes").get<int64_t>(),
                              f.at("modified_ns").get<int64_t>(), f.value("edges_fnv1a", "")});
    }
    s.schedule = schedule_from_json(j.at("lr_schedule"));
    s.next_lr = j.at("next_lr").get<double>();
    s.rng_state = j.at("cpu_rng_state").get<std::string>();
    s.zt_version = j.at("zt_version").get<std::string>();
    return s;
  } catch (const json::exception& e) {
    throw ConfigError("checkpoint " + folder +
                      ": its trainer state is not one zt's trainer wrote (" + e.what() +
                      "); resume from a checkpoint `trainer` saved");
  }
}

std::string cpu_rng_state_hex() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  const auto* bytes = state.data_ptr<uint8_t>();
  std::string hex(static_cast<size_t>(state.numel()) * 2, '0');
  for (int64_t i = 0; i < state.numel(); ++i) {
    hex[2 * i] = kHexDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kHexDigits[bytes[i] & 15];
  }
  return hex;
}

void restore_cpu_rng_state(const std::string& hex, const std::string& folder) {
  at::Tensor state = at::empty({static_cast<int64_t>(hex.size() / 2)}, at::kByte);
  auto* bytes = state.data_ptr<uint8_t>();
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    const int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0 || hex.size() % 2 != 0) {
      throw ConfigError("checkpoint " + folder +
                        ": the saved CPU generator state is not hex; resume from a checkpoint "
                        "`trainer` saved");
    }
    bytes[i / 2] = static_cast<uint8_t>(hi * 16 + lo);
  }
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const c10::Error& e) {
    throw ConfigError("checkpoint " + folder +
                      ": this LibTorch does not accept the saved CPU generator state (" +
                      e.what_without_backtrace() + "); resume with the LibTorch that saved it");
  }
}

void remove_stopped_saves(const CheckpointSettings& settings) {
  std::string finished;
  try {
    finished = finish_interrupted_publish(settings.dir);
  } catch (const IoError& e) {
    // Readers follow the pending `latest` as it is; the next save replaces it anyway.
    std::printf("checkpoints: note: %s\n", e.what());
  }
  if (!finished.empty()) {
    std::printf("checkpoints: %s is the latest now: a stopped job had saved it whole and was "
                "stopped before it pointed `latest` at it\n",
                finished.c_str());
  }
  for (const auto& folder : remove_incomplete_checkpoints(settings.dir)) {
    std::printf("checkpoints: removed %s, an incomplete save a stopped job left\n", folder.c_str());
  }
  std::fflush(stdout);
}

std::chrono::milliseconds checkpoint_io_limit(std::chrono::milliseconds launch_timeout) {
  return launch_timeout / 2;
}

std::string resolve_checkpoint_within(const std::string& path,
                                      std::chrono::milliseconds launch_timeout) {
  const FileIoDeadline deadline("looking up the checkpoint " + path,
                                checkpoint_io_limit(launch_timeout), kCheckpointIoWayOut);
  return resolve_checkpoint(path);
}

std::unique_ptr<CheckpointReader> open_checkpoint_within(const std::string& path,
                                                         std::chrono::milliseconds launch_timeout) {
  return std::make_unique<CheckpointReader>(resolve_checkpoint_within(path, launch_timeout),
                                            checkpoint_io_limit(launch_timeout));
}

std::unique_ptr<CheckpointReader> open_resume_checkpoint(const CheckpointSettings& settings,
                                                         bool leader,
                                                         std::chrono::milliseconds launch_timeout) {
  if (settings.resume.empty()) return nullptr;
  std::string folder;
  if (settings.resume == "auto") {
    {
      const FileIoDeadline deadline("looking up the newest checkpoint in " + settings.dir,
                                    checkpoint_io_limit(launch_timeout), kCheckpointIoWayOut);
      folder = latest_checkpoint(settings.dir);
    }
    if (folder.empty()) {
      if (leader) {
        std::printf("no checkpoint under %s: starting fresh\n", settings.dir.c_str());
        std::fflush(stdout);
      }
      return nullptr;
    }
  } else {
    folder = resolve_checkpoint_within(settings.resume, launch_timeout);
  }
  return std::make_unique<CheckpointReader>(folder, checkpoint_io_limit(launch_timeout));
}

namespace {

// Rank 0's word to the others, as length-prefixed fields (paths may hold any byte): "none";
// "failed", its error's kind and text; or "open", the step, the saved trainer state, the folder
// relative to what rank 0 was asked for ("" when not under it) and the folder itself.
std::string pack(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) out += std::to_string(f.size()) + ":" + f;
  return out;
}

std::vector<std::string> unpack(const std::string& text) {
  std::vector<std::string> fields;
  for (size_t at = 0; at < text.size();) {
    const size_t colon = text.find(':', at);
    const size_t size = std::stoull(text.substr(at, colon - at));
    fields.push_back(text.substr(colon + 1, size));
    at = colon + 1 + size;
  }
  return fields;
}

// The folder a checkpoint path names checkpoints under: itself when a folder, else its parent
// (dir/latest, dir/best). Its lookup is bounded by `io_limit`.
std::filesystem::path base_of(const std::string& path, std::chrono::milliseconds io_limit) {
  const FileIoDeadline deadline("looking up " + path, io_limit, kCheckpointIoWayOut);
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) ? std::filesystem::path(path)
                                                 : std::filesystem::path(path).parent_path();
}

}  // namespace

std::unique_ptr<CheckpointReader> open_rank0_checkpoint(
    const std::function<std::unique_ptr<CheckpointReader>()>& open, const std::string& asked,
    const std::string& path, Store& store, const std::string& key, int rank,
    std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds io_limit = checkpoint_io_limit(timeout);
  auto publish = [&](const std::vector<std::string>& fields) {
    const std::string text = pack(fields);
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  };
  if (rank == 0) {
    std::unique_ptr<CheckpointReader> reader;
    try {
      reader = open();
    } catch (const Error& e) {
      publish({"failed", std::to_string(static_cast<int>(e.kind())), e.what()});
      // A path that names no checkpoint is named with the setting that gave it, here too ("not
      // a checkpoint: runs/x does not exist" alone did not say which; the other ranks' message
      // did). Other errors name their file, and one of `open`'s own (eval's --out) is not the
      // checkpoint's.
      if (e.kind() != ErrorKind::kConfig) throw;
      throw ConfigError(asked + ": " + e.what());
    } catch (const std::exception& e) {
      publish({"failed", std::to_string(static_cast<int>(ErrorKind::kInternal)), e.what()});
      throw;
    }
    if (!reader) {
      publish({"none"});
      return reader;
    }
    const std::filesystem::path relative =
        std::filesystem::path(reader->folder()).lexically_relative(base_of(path, io_limit));
    const bool under = !relative.empty() && *relative.begin() != "..";
    publish({"open", std::to_string(reader->step()), reader->meta().trainer_state,
             under ? relative.string() : "", reader->folder()});
    return reader;
  }
  const std::vector<uint8_t> value = store.get(key, timeout);
  const std::vector<std::string> choice = unpack(std::string(value.begin(), value.end()));
  if (choice.at(0) == "none") return nullptr;
  const std::string who = "rank " + std::to_string(rank);
  if (choice.at(0) == "failed") {
    throw_of_kind(std::stoi(choice.at(1)), who + ": rank 0 could not open the checkpoint for " +
                                               asked + ": " + choice.at(2));
  }
  const std::string& step = choice.at(1);
  const std::string& state = choice.at(2);
  const std::string& relative = choice.at(3);
  const std::string& folder = choice.at(4);
  // The same folder under this rank's own path first: one shared folder may be mounted at
  // another path here (Python ranks pass their own).
  std::vector<std::string> candidates;
  if (!relative.empty())
    candidates.push_back((base_of(path, io_limit) / relative).lexically_normal());
  if (candidates.empty() || candidates.front() != folder) candidates.push_back(folder);
  const std::string way_out =
      " for " + asked +
      ": every rank loads the folder rank 0 chose, so the checkpoints must be in one folder "
      "that every host sees alike (a shared file system, not node-local storage)";
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    bool there = false;
    {
      const FileIoDeadline deadline("looking for rank 0's checkpoint at " + candidate, io_limit,
                                    kCheckpointIoWayOut);
      there = std::filesystem::is_directory(candidate, ec);
    }
    if (!there) continue;
    auto reader = std::make_unique<CheckpointReader>(candidate, io_limit);
    if (std::to_string(reader->step()) != step || reader->meta().trainer_state != state) {
      throw ConfigError(who + " finds another checkpoint at " + candidate + " than rank 0 at " +
                        folder + " (another step or saved state: a copy of another run's)" +
                        way_out);
    }
    return reader;
  }
  // An IoError: a file system's cache that does not show the folder yet is worth a restart.
  throw IoError(who + " finds no folder " + candidates.front() + ", the checkpoint rank 0 loads" +
                (candidates.size() > 1 ? " (at " + folder + " on rank 0)" : std::string()) +
                way_out);
}

void check_same_model(const std::string& saved_toml, const std::string& now_toml,
                      const std::string& folder) {
  const auto refuse = [&](const std::string& what, const std::string& now, const std::string& saved,
                          const std::string& way_back) {
    throw ConfigError(what + " = " + now + " in this config, but " + folder + " was trained with " +
                      saved + ": the same tensors would compute another function; set it back (" +
                      way_back +
                      "), or export its weights (trainer export) and start a new run from them "
                      "with model.init_from");
  };
  const std::string saved_kind = resolved_config_value(saved_toml, "model", "kind");
  const std::string now_kind = resolved_config_value(now_toml, "model", "kind");
  if (!saved_kind.empty() && !now_kind.empty() && saved_kind != now_kind)
    refuse("model.kind", now_kind, saved_kind, "--set model.kind=" + saved_kind);
  const std::string kind = now_kind.empty() ? saved_kind : now_kind;
  if (kind == "\"gpt\"") {
    // The heads as each config resolves them: n_head = 0 takes the preset's, so the text of
    // n_head alone passed another preset's count, and refused the preset's count written out.
    const int64_t saved = models::gpt_heads_of_config(saved_toml);
    const int64_t now = models::gpt_heads_of_config(now_toml);
    if (saved > 0 && now > 0 && saved != now) {
      refuse("the GPT's attention heads (model.n_head, else its preset's)", std::to_string(now),
             std::to_string(saved), "--set model.n_head=" + std::to_string(saved));
    }
  } else if (kind == "\"mlp\"") {
    // Only the MLP reads model.activation.
    const std::string saved = resolved_config_value(saved_toml, "model", "activation");
    const std::string now = resolved_config_value(now_toml, "model", "activation");
    if (!saved.empty() && !now.empty() && saved != now)
      refuse("model.activation", now, saved, "--set model.activation=" + saved);
  }
}

std::string val_fraction_note(const std::string& saved_toml, const std::string& now_toml) {
  const std::string saved = resolved_config_value(saved_toml, "data", "val_fraction");
  const std::string now = resolved_config_value(now_toml, "data", "val_fraction");
  if (saved.empty() || now.empty() || saved == now) return "";
  return "  note: data.val_fraction was " + saved + " when this checkpoint trained, now " + now +
         ": the training windows and the held-out tail moved" +
         (std::stod(now) > std::stod(saved) ? " (validation now counts samples it trained on)"
                                            : "") +
         "\n";
}

std::string held_out_split_note(const TrainerState& saved, const std::string& saved_toml,
                                const data::HeldOutSplit& now, const std::string& now_toml) {
  const std::string& now_split = now.where;
  const std::string share = resolved_config_value(saved_toml, "data", "val_fraction");
  if (now_split.empty() || share.empty() ||
      share != resolved_config_value(now_toml, "data", "val_fraction")) {
    return "";  // no share now, or a share that moved: val_fraction_note's
  }
  std::string then;
  // A recorded "" is a state without data of the trainer's (a Python engine's): nothing to compare.
  if (saved.data_split_recorded && !saved.data_split.empty() && saved.data_split != now_split) {
    then = "at " + saved.data_split + " when this checkpoint trained";
  } else if (!saved.data_split_recorded && now.at_document) {
    // Its zt split a prepared file at the share's token: only a document's start moved since.
    then = "this checkpoint's zt split the file at the share's token, not at a document's start";
  } else {
    return "";
  }
  return "  note: data.val_fraction's held-out part starts at " + now_split + ", but " + then +
         ": the training windows and the held-out part moved\n";
}

namespace {

TrainerState::DataFile data_file_now(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {path, -1, 0, ""};
  const int64_t bytes = static_cast<int64_t>(st.st_size);
  const int64_t modified = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                           st.st_mtim.tv_nsec;
  // Read once per file version: every save records it (on every rank), a stat tells it unchanged.
  static std::mutex mutex;
  static std::map<std::string, TrainerState::DataFile> seen;
  std::lock_guard<std::mutex> lock(mutex);
  const auto known = seen.find(path);
  if (known != seen.end() && known->second.bytes == bytes && known->second.modified_ns == modified)
    return known->second;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {path, -1, 0, ""};
  const int64_t mib = 1 << 20;
  std::string edges(static_cast<size_t>(std::min(bytes, 2 * mib)), '\0');
  const int64_t head = std::min(bytes, mib), tail = static_cast<int64_t>(edges.size()) - head;
  in.read(edges.data(), head);
  in.seekg(bytes - tail);
  in.read(edges.data() + head, tail);
  if (!in) return {path, -1, 0, ""};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint_of(edges)));
  return seen[path] = {path, bytes, modified, hex};
}

// "12345 bytes, modified 2026-12-05T22:13:20Z" (the manifest's `created` format), or
// "unreadable".
std::string size_and_time_text(const TrainerState::DataFile& f) {
  if (f.bytes < 0) return "unreadable";
  const time_t seconds = static_cast<time_t>(f.modified_ns / 1000000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::to_string(f.bytes) + " bytes, modified " + when;
}

}  // namespace

std::string resume_differences(const TrainerState& saved, const TrainerState& now) {
  std::string notes;
  if (saved.samples_per_step != now.samples_per_step) {
    notes += "  note: the global batch was " + std::to_string(saved.samples_per_step) +
             " samples per step, now " + std::to_string(now.samples_per_step) +
             "; the data stream continues at sample " + std::to_string(saved.next_sample) + "\n";
  }
  if (saved.data_kind != now.data_kind || saved.data_path != now.data_path ||
      saved.data_seed != now.data_seed) {
    notes += "  note: the data differs from the checkpoint's (" + saved.data_kind + " " +
             saved.data_path + ", seed " + std::to_string(saved.data_seed) + ")\n";
  } else {
    // The same files by name: each must also hold what it held, by its size and edges (a copy
    // moves only the time, and needs no word).
    for (const TrainerState::DataFile& then : saved.data_files) {
      for (const TrainerState::DataFile& f : now.data_files) {
        const bool same = f.bytes == then.bytes && (then.edges.empty() || f.edges == then.edges);
        if (f.path != then.path || same) continue;
        notes += "  note: " + f.path + " changed since this checkpoint was saved (then " +
                 size_and_time_text(then) + "; now " + size_and_time_text(f) +
                 "): the data stream goes on at sample " + std::to_string(saved.next_sample) +
                 " of what the file holds now, not of what the run trained on; put the old file "
                 "back to continue that run, or start without --resume to train on this one\n";
      }
    }
  }
  if (!same_schedule(saved.schedule, now.schedule)) {
    notes += "  note: the lr schedule differs from the checkpoint's (" +
             schedule_text(saved.schedule) + "); continuing with this config's (" +
             schedule_text(now.schedule) + ")\n";
  }
  return notes;
}

TrainerState trainer_state_at(const JobSettings& job, int world, int64_t step, int64_t updates,
                              int64_t next_sample, const Schedule& schedule) {
  TrainerState state;
  state.step = step;
  state.next_sample = next_sample;
  state.samples_per_step = job.data.samples_per_step(world);
  state.data_kind = job.data.kind;
  state.data_path = job.data.source_name();
  state.data_seed = job.data.seed;  // the training stream's (data/data_source.h)
  if (job.data.kind != "synthetic") {
    for (const std::string& path :
         job.data.paths.empty() ? std::vector<std::string>{job.data.path} : job.data.paths)
      state.data_files.push_back(data_file_now(path));
  }
  state.schedule = schedule;
  state.next_lr = schedule.lr(updates);
  state.rng_state = cpu_rng_state_hex();
  state.zt_version = ZT_TRAINER_VERSION;
  return state;
}

TrainCheckpoints::TrainCheckpoints(const CheckpointSettings& settings, Store& store, int rank,
                                   int world, const std::string& job)
    : saver_(CheckpointOptions{settings.dir, settings.keep_last, settings.async, settings.timeout,
                               job, settings.keep_best},
             store, rank, world) {}

std::optional<SaveStats> TrainCheckpoints::save(Engine& engine, int64_t step,
                                                const CheckpointMeta& meta) {
  // save() would wait for the previous save anyway; waiting here first lets it be reported
  // before the next one can complete and take its place as the last completed.
  saver_.finish();
  std::optional<SaveStats> previous = newly_completed();
  {
    const trace::Scope span("checkpoint snapshot", trace::kCheckpoint);
    saver_.save(engine, step, meta);
  }
  return previous;
}

std::optional<SaveStats> TrainCheckpoints::poll() {
  saver_.poll();
  return newly_completed();
}

std::optional<SaveStats> TrainCheckpoints::finish() {
  saver_.finish();
  return newly_completed();
}

std::optional<SaveStats> TrainCheckpoints::newly_completed() {
  std::optional<SaveStats> last = saver_.last_completed();
  if (!last || last->step == reported_step_) return std::nullopt;
  reported_step_ = last->step;
  return last;
}

int64_t folder_bytes(const std::string& folder) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    if (entry.is_regular_file(ec)) bytes += static_cast<int64_t>(entry.file_size(ec));
  }
  return bytes;
}

}  // namespace zt::trainer
