// Fuzz target: a whole checkpoint folder opened and read: the input is manifest.json, then each
// rank file, apart at kFileSeparator lines. Each rank file takes the name the manifest's
// "files" list gives it where that name is a plain file name (a name that leaves the folder is
// written nowhere: the reader must refuse it). The checksums are made to match what the input
// holds (the manifest's crc32 file, each file's size and header crc32, each piece's crc32), so
// the fuzzer reaches the layout checks and the reads behind them instead of stopping at a
// checksum. Then every range of every tensor and kind is read in a few slices.
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <vector>

#include "fuzz_support.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

namespace {

using Json = nlohmann::json;

uint32_t crc_of(const std::string& bytes, size_t begin, size_t count) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + begin), static_cast<uInt>(count)));
}

bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name.size() < 200;
}

// The manifest with its files' sizes and checksums and its pieces' checksums set from `files`
// (name -> bytes), where the structure allows; the text as given otherwise.
std::string with_matching_checksums(const std::string& text,
                                    const std::vector<std::pair<std::string, std::string>>& files) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return text;
  auto bytes_of = [&](const Json& name) -> const std::string* {
    if (!name.is_string()) return nullptr;
    for (const auto& f : files)
      if (f.first == name.get<std::string>()) return &f.second;
    return nullptr;
  };
  if (j.contains("files") && j["files"].is_array()) {
    for (Json& f : j["files"]) {
      if (!f.is_object() || !f.contains("name")) continue;
      const std::string* bytes = bytes_of(f["name"]);
      if (bytes == nullptr) continue;
      f["bytes"] = bytes->size();
      if (f.contains("header_bytes") && f["header_bytes"].is_number_integer()) {
        const int64_t header = f["header_bytes"].get<int64_t>();
        if (header >= 0 && static_cast<size_t>(header) <= bytes->size())
          f["header_crc32"] = crc_of(*bytes, 0, static_cast<size_t>(header));
      }
    }
  }
  if (j.contains("pieces") && j["pieces"].is_array()) {
    for (Json& p : j["pieces"]) {
      if (!p.is_object() || !p.contains("file")) continue;
      const std::string* bytes = bytes_of(p["file"]);
      if (bytes == nullptr || !p["offset"].is_number_integer() || !p["begin"].is_number_integer() ||
          !p["end"].is_number_integer())
        continue;
      const int64_t offset = p["offset"].get<int64_t>();
      const int64_t begin = p["begin"].get<int64_t>(), end = p["end"].get<int64_t>();
      if (offset < 0 || begin < 0 || end < begin || end - begin > (int64_t{1} << 40)) continue;
      const int64_t count = (end - begin) * 4;  // fp32
      if (offset + count <= static_cast<int64_t>(bytes->size()))
        p["crc32"] = crc_of(*bytes, static_cast<size_t>(offset), static_cast<size_t>(count));
    }
  }
  return j.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const zt::fuzz::Scratch& scratch = zt::fuzz::scratch();
  scratch.reset();
  const std::vector<std::string> parts = zt::fuzz::split_parts(data, size,
                                                               zt::fuzz::kFileSeparator);
  std::vector<std::pair<std::string, std::string>> files;
  {
    const Json j = Json::parse(parts[0], nullptr, false);
    const Json* list = nullptr;
    if (!j.is_discarded() && j.is_object() && j.contains("files") && j["files"].is_array())
      list = &j["files"];
    for (size_t i = 1; i < parts.size(); ++i) {
      std::string name = "rank-" + std::to_string(i - 1) + ".safetensors";
      if (list != nullptr && i - 1 < list->size() && (*list)[i - 1].is_object() &&
          (*list)[i - 1].contains("name") && (*list)[i - 1]["name"].is_string()) {
        name = (*list)[i - 1]["name"].get<std::string>();
      }
      if (plain_name(name)) files.emplace_back(name, parts[i]);
    }
  }
  const std::string folder = "ckpt/step-00000001";
  for (const auto& f : files) scratch.write(folder + "/" + f.first, f.second);
  zt::fuzz::write_manifest(folder, with_matching_checksums(parts[0], files));
  try {
    (void)zt::latest_checkpoint(scratch.path() + "/ckpt");
    const zt::CheckpointReader reader(zt::resolve_checkpoint(scratch.path() + "/ckpt"));
    (void)reader.counters();
    (void)reader.meta();
    std::vector<float> out;
    for (const zt::CheckpointTensor& t : reader.tensors()) {
      const int64_t numel = t.numel();
      for (const std::string& kind : reader.kinds()) {
        // A slice at each end and one in the middle: every piece they touch is read and checked.
        for (const int64_t begin : {int64_t{0}, numel / 2, std::max<int64_t>(numel - 64, 0)}) {
          const int64_t end = std::min<int64_t>(begin + 64, numel);
          if (end <= begin) continue;
          out.assign(static_cast<size_t>(end - begin), 0.0f);
          try {
            reader.read(t.name, kind, begin, end, out.data());
          } catch (const zt::Error& e) {
            zt::fuzz::refused(e);
          }
        }
      }
    }
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  return 0;
}
