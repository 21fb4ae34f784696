#include "checkpoint/checkpoint_manifest.h"

#include <cmath>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "zt/error.h"
#include "zt/host/json_numbers.h"
#include "zt/host/safetensors.h"

#ifndef ZT_VERSION_STRING
#error "ZT_VERSION_STRING comes from core/CMakeLists.txt (the project's version)"
#endif

namespace zt {

int64_t CheckpointTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace ckpt {

namespace {

using Json = nlohmann::ordered_json;

// How a value check's error starts; manifest_from_json puts the manifest's path in its place.
constexpr const char* kUnplaced = "checkpoint manifest: ";

// An integer of a manifest as `Int`: a float, or a number outside Int's range, is refused
// (converting either is undefined behaviour in the JSON library's get<Int>()).
template <typename Int>
Int whole_value(const Json& v, const char* key) {
  if (const std::optional<Int> i = json_integer<Int>(v)) return *i;
  throw ConfigError(std::string(kUnplaced) + "\"" + key + "\" is " + v.dump() +
                    ", not an integer in its range; the manifest is damaged: resume from an "
                    "older checkpoint");
}
template <typename Int>
Int whole(const Json& j, const char* key) {
  return whole_value<Int>(j.at(key), key);
}
// A count (steps, samples): json_count's range.
int64_t count(const Json& j, const char* key) {
  const std::optional<int64_t> n = json_count(j.at(key));
  if (!n) {
    throw ConfigError(std::string(kUnplaced) + "\"" + key + "\" is " + j.at(key).dump() +
                      ", not a count from 0 to 2^62; the manifest is damaged: resume from an "
                      "older checkpoint");
  }
  return *n;
}

Json counters_json(const EngineCounters& c) {
  return {{"optimizer_steps", c.optimizer_steps}, {"loss_scale", c.loss_scale},
          {"clean_steps", c.clean_steps},         {"hysteresis_left", c.hysteresis_left},
          {"state_dtype", c.state_dtype},         {"master_dtype", c.master_dtype},
          {"residual_unit", c.residual_unit},     {"unscalable_in_a_row", c.unscalable_in_a_row}};
}

EngineCounters counters_from(const Json& j) {
  EngineCounters c;
  c.optimizer_steps = count(j, "optimizer_steps");
  c.loss_scale = j.at("loss_scale").get<double>();
  c.clean_steps = count(j, "clean_steps");
  c.hysteresis_left = count(j, "hysteresis_left");
  if (j.contains("state_dtype")) c.state_dtype = j.at("state_dtype").get<std::string>();
  if (j.contains("master_dtype")) c.master_dtype = j.at("master_dtype").get<std::string>();
  if (j.contains("unscalable_in_a_row")) {
    c.unscalable_in_a_row = whole<int64_t>(j, "unscalable_in_a_row");
    if (c.unscalable_in_a_row < 0 || c.unscalable_in_a_row > 1) {
      throw ConfigError(std::string(kUnplaced) + "unscalable_in_a_row " +
                        std::to_string(c.unscalable_in_a_row) +
                        " is neither 0 nor 1; the manifest is damaged: resume from another "
                        "checkpoint");
    }
  }
  if (j.contains("residual_unit")) {
    c.residual_unit = j.at("residual_unit").get<double>();
    if (!std::isfinite(c.residual_unit) || c.residual_unit < 0) {
      throw ConfigError(std::string(kUnplaced) + "residual_unit " +
                        std::to_string(c.residual_unit) +
                        " is not a finite value >= 0; the manifest is damaged: resume from "
                        "another checkpoint");
    }
  }
  return c;
}

Json tensors_json(const std::vector<CheckpointTensor>& tensors) {
  Json list = Json::array();
  for (const auto& t : tensors) list.push_back({{"name", t.name}, {"shape", t.shape}});
  return list;
}

// A manifest is data from wherever the checkpoint came from: a shape whose element count does not
// fit int64 (or has a negative dimension) is refused here, so numel() never overflows later.
std::vector<CheckpointTensor> tensors_from(const Json& j, const std::string& path) {
  std::vector<CheckpointTensor> tensors;
  for (const auto& t : j) {
    CheckpointTensor tensor{t.at("name").get<std::string>(), {}};
    for (const auto& d : t.at("shape")) tensor.shape.push_back(whole_value<int64_t>(d, "shape"));
    int64_t n = 1;
    for (int64_t d : tensor.shape) {
      if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
        throw ConfigError(path + ": tensor '" + tensor.name +
                          "' has a shape whose element count is negative or does not fit 64 "
                          "bits; the manifest is damaged: resume from an older checkpoint");
      }
    }
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// A rank file as the manifest gives it: one plain file name inside the checkpoint folder, never a
// path that leaves it ("../x", "/etc/passwd", "sub/x"); a header (read whole at first use) no
// longer than the file, so a manifest cannot make the reader allocate more than the file holds.
void check_file(const FileRecord& f, const std::string& path) {
  const std::string& name = f.name;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    throw ConfigError(path + ": rank file name '" + name +
                      "' is not a plain file name in the checkpoint folder (a manifest may not "
                      "name files elsewhere); the checkpoint is damaged or was tampered with: "
                      "resume from one zt wrote");
  }
  // The reader allocates the header whole: a length past safetensors' own limit is damage.
  if (f.bytes < 8 || f.header_bytes < 8 || f.header_bytes > f.bytes ||
      f.header_bytes > kSafetensorsMaxHeaderBytes) {
    throw ConfigError(path + ": rank file " + name +
                      ": the manifest says its safetensors header is " +
                      std::to_string(f.header_bytes) + " bytes of a " + std::to_string(f.bytes) +
                      "-byte file; the manifest is damaged: resume from an older checkpoint");
  }
}

Json piece_json(const PieceRecord& p, bool with_file) {
  Json j = {{"tensor", p.piece.tensor},
            {"kind", p.piece.kind},
            {"begin", p.piece.begin},
            {"end", p.piece.end}};
  if (with_file) j["file"] = p.file;
  j["offset"] = p.offset;
  j["crc32"] = p.crc32;
  return j;
}

PieceRecord piece_from(const Json& j, const std::string& file) {
  PieceRecord p;
  p.piece = {j.at("tensor").get<std::string>(), j.at("kind").get<std::string>(),
             whole<int64_t>(j, "begin"), whole<int64_t>(j, "end")};
  p.file = j.contains("file") ? j.at("file").get<std::string>() : file;
  p.offset = whole<int64_t>(j, "offset");
  p.crc32 = whole<uint32_t>(j, "crc32");
  return p;
}

Json file_json(const FileRecord& f) {
  return {{"name", f.name},
          {"bytes", f.bytes},
          {"header_bytes", f.header_bytes},
          {"header_crc32", f.header_crc32}};
}

FileRecord file_from(const Json& j) {
  return {j.at("name").get<std::string>(), whole<int64_t>(j, "bytes"),
          whole<int64_t>(j, "header_bytes"), whole<uint32_t>(j, "header_crc32")};
}

// Indented at the top level, one line per tensor, file and piece: easy to read and to grep,
// and small for a model with thousands of pieces.
std::string one_line_per_entry(const Json& j) {
  std::string text = "{";
  const char* separator = "\n ";
  for (auto it = j.begin(); it != j.end(); ++it) {
    text += separator + Json(it.key()).dump() + ": ";
    separator = ",\n ";
    if (!it.value().is_array() || it.value().empty()) {
      text += it.value().dump();
      continue;
    }
    text += "[";
    const char* item = "\n  ";
    for (const auto& entry : it.value()) {
      text += item + entry.dump();
      item = ",\n  ";
    }
    text += "\n ]";
  }
  return text + "\n}\n";
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

std::string report_to_json(const RankReport& r) {
  Json j = {{"rank", r.rank}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    j["error_kind"] = r.error_kind;
    return j.dump();
  }
  j["file"] = file_json(r.file);
  j["counters"] = counters_json(r.counters);
  j["tensors"] = tensors_json(r.tensors);
  Json pieces = Json::array();
  for (const auto& p : r.pieces) pieces.push_back(piece_json(p, false));
  j["pieces"] = std::move(pieces);
  return j.dump();
}

RankReport report_from_json(const std::string& text) {
  try {
    const Json j = Json::parse(text);
    RankReport r;
    r.rank = whole<int>(j, "rank");
    if (j.contains("error")) {
      r.error = j.at("error").get<std::string>();
      r.error_kind = j.value("error_kind", "");
      return r;
    }
    r.file = file_from(j.at("file"));
    r.counters = counters_from(j.at("counters"));
    r.tensors = tensors_from(j.at("tensors"), "a rank's report");
    for (const auto& p : j.at("pieces")) r.pieces.push_back(piece_from(p, r.file.name));
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InternalError(std::string("checkpoint: a rank's report does not parse: ") + e.what());
  }
}

Manifest assemble_manifest(int64_t step, const CheckpointMeta& meta,
                           const std::vector<RankReport>& reports) {
  Manifest m;
  m.zt_version = ZT_VERSION_STRING;
  m.step = step;
  m.world = static_cast<int>(reports.size());
  m.created = utc_now();
  m.meta = meta;
  if (!reports.empty()) {
    m.counters = reports.front().counters;
    m.tensors = reports.front().tensors;
  }
  for (const auto& r : reports) {
    m.files.push_back(r.file);
    m.pieces.insert(m.pieces.end(), r.pieces.begin(), r.pieces.end());
  }
  return m;
}

std::string manifest_to_json(const Manifest& m) {
  Json trainer_state = nullptr;
  if (!m.meta.trainer_state.empty()) {
    trainer_state = Json::parse(m.meta.trainer_state, nullptr, false);
    if (trainer_state.is_discarded() || !trainer_state.is_object()) {
      throw InternalError("checkpoint: the trainer state is not a JSON object: " +
                          m.meta.trainer_state.substr(0, 200));
    }
  }
  Json j = {{"format", kFormatName},      {"version", m.version},
            {"zt_version", m.zt_version}, {"step", m.step},
            {"world", m.world},           {"created", m.created},
            {"saved_by", m.meta.saved_by}};
  j["counters"] = counters_json(m.counters);
  j["trainer_state"] = std::move(trainer_state);
  j["config_toml"] = m.meta.config_toml;
  // JSON has no NaN: a metric that is not finite is not recorded (and can never be the best).
  Json metrics = Json::object();
  for (const auto& [name, value] : m.meta.metrics) {
    if (std::isfinite(value)) metrics[name] = value;
  }
  if (!metrics.empty()) j["metrics"] = std::move(metrics);
  j["tensors"] = tensors_json(m.tensors);
  Json files = Json::array(), pieces = Json::array();
  for (const auto& f : m.files) files.push_back(file_json(f));
  for (const auto& p : m.pieces) pieces.push_back(piece_json(p, true));
  j["files"] = std::move(files);
  j["pieces"] = std::move(pieces);
  return one_line_per_entry(j);
}

Manifest manifest_from_json(const std::string& text, const std::string& path) {
  const Json j = Json::parse(text, nullptr, false);
  // value() would throw nlohmann's type error for a "format" that is not a string.
  const bool is_manifest = !j.is_discarded() && j.is_object() && j.contains("format") &&
                           j.at("format").is_string() &&
                           j.at("format").get<std::string>() == kFormatName;
  if (!is_manifest) {
    throw ConfigError("not a checkpoint: " + path +
                      " is not a zt checkpoint manifest (no \"format\": \"" + kFormatName +
                      "\"); give a folder that zt's [checkpoint] wrote");
  }
  Manifest m;
  try {
    m.version = whole<int64_t>(j, "version");
    if (m.version > kFormatVersion) {
      throw ConfigError(path + ": checkpoint format version " + std::to_string(m.version) +
                        " is newer than this zt reads (" + std::to_string(kFormatVersion) +
                        "); load it with the zt that wrote it (" + j.value("zt_version", "?") +
                        ") or newer");
    }
    m.zt_version = j.at("zt_version").get<std::string>();
    m.step = count(j, "step");
    m.world = whole<int>(j, "world");
    m.created = j.at("created").get<std::string>();
    m.meta.saved_by = j.at("saved_by").get<std::string>();
    if (!j.at("trainer_state").is_null()) m.meta.trainer_state = j.at("trainer_state").dump();
    m.meta.config_toml = j.at("config_toml").get<std::string>();
    // Written since keep_best: older manifests have none.
    if (j.contains("metrics"))
      m.meta.metrics = j.at("metrics").get<std::map<std::string, double>>();
    m.counters = counters_from(j.at("counters"));
    m.tensors = tensors_from(j.at("tensors"), path);
    for (const auto& f : j.at("files")) {
      m.files.push_back(file_from(f));
      check_file(m.files.back(), path);
    }
    for (const auto& p : j.at("pieces")) m.pieces.push_back(piece_from(p, ""));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + ": the checkpoint manifest does not parse (" + e.what() +
                      "); resume from an older checkpoint");
  } catch (const ConfigError& e) {
    // The value checks above know the key, not the file: named here.
    const std::string what = e.what();
    if (what.rfind(kUnplaced, 0) != 0) throw;
    throw ConfigError(path + ": " + what.substr(std::strlen(kUnplaced)));
  }
  return m;
}

}  // namespace ckpt
}  // namespace zt
