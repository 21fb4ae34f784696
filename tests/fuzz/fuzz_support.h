// What the fuzz targets share: a scratch folder per process that every input reuses (emptied
// before each, so one input's files never meet the next's), and inputs cut into parts at a
// separator line (a checkpoint folder's files travel as one input).
// Each target defines LLVMFuzzerTestOneInput: libFuzzer's driver calls it in a fuzz build
// (scripts/fuzz.sh), replay_main.cc's in the normal build (the CTest corpus replays).
// Its contract: a zt::Error is the parser's refusal and ends the input quietly, except an
// InternalError (zt's own bug, refused() aborts on it); anything else escaping (another
// exception, a crash, a sanitizer report) is a finding too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace zt::fuzz {

// A folder under the temporary folder, made once per process and removed at exit.
class Scratch {
 public:
  Scratch();
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // Removes everything the last input left.
  void reset() const;
  const std::string& path() const { return path_; }
  // Writes `bytes` to path()/name (sub-folders made as needed) and returns the file's path.
  std::string write(const std::string& name, const std::string& bytes) const;

 private:
  std::string path_;
};

// The process's scratch folder.
const Scratch& scratch();

// The scratch folder emptied, then the input written to scratch()/name; returns its path.
std::string input_file(const std::string& name, const uint8_t* data, size_t size);

// Writes `text` as scratch()/folder/manifest.json with the crc32 file a published checkpoint has
// beside it, matching, so the reader gets past the checksum to what is fuzzed.
void write_manifest(const std::string& folder, const std::string& text);

// The input's bytes split at every occurrence of `separator` (which no part then holds).
std::vector<std::string> split_parts(const uint8_t* data, size_t size,
                                     const std::string& separator);

// Called with each refusal: prints its message when ZT_FUZZ_VERBOSE is set (to see why a seed
// stops where it does), else nothing; aborts on an InternalError (a finding).
void refused(const std::exception& e);

// The separator between the files of a multi-file input: a line no JSON or TOML seed holds.
constexpr const char* kFileSeparator = "\n%%zt-fuzz-file%%\n";

}  // namespace zt::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
