#include "fuzz_support.h"

#include <stdlib.h>
#include <zlib.h>

#include <cstdio>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "zt/error.h"

namespace fs = std::filesystem;

namespace zt::fuzz {

Scratch::Scratch() {
  std::string pattern = (fs::temp_directory_path() / "zt-fuzz-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("zt fuzz: cannot make a scratch folder under " +
                             fs::temp_directory_path().string());
  }
  path_ = pattern;
}

Scratch::~Scratch() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void Scratch::reset() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) fs::remove_all(entry.path(), ec);
}

std::string Scratch::write(const std::string& name, const std::string& bytes) const {
  const fs::path file = fs::path(path_) / name;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return file.string();
}

void refused(const std::exception& e) {
  // An InternalError is zt's own bug ("please report"), not a refusal of bad input: a corrupt
  // file must be a ConfigError or IoError naming it.
  if (dynamic_cast<const zt::InternalError*>(&e) != nullptr) {
    std::fprintf(stderr, "finding: bad input ended in an internal error: %s\n", e.what());
    std::abort();
  }
  static const bool verbose = std::getenv("ZT_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
}

const Scratch& scratch() {
  static const Scratch folder;
  return folder;
}

std::string input_file(const std::string& name, const uint8_t* data, size_t size) {
  scratch().reset();
  return scratch().write(name, std::string(reinterpret_cast<const char*>(data), size));
}

void write_manifest(const std::string& folder, const std::string& text) {
  scratch().write(folder + "/manifest.json", text);
  char crc[9];
  std::snprintf(
      crc, sizeof(crc), "%08lx",
      crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
  scratch().write(folder + "/manifest.json.crc32", crc);
}

std::vector<std::string> split_parts(const uint8_t* data, size_t size,
                                     const std::string& separator) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t next = text.find(separator, at);
    if (next == std::string::npos) break;
    parts.push_back(text.substr(at, next - at));
    at = next + separator.size();
  }
  parts.push_back(text.substr(at));
  return parts;
}

}  // namespace zt::fuzz
