// Fuzz target: a file opened as safetensors (what model.init_from and a checkpoint's rank files
// go through): the length prefix, the JSON header, every entry's dtype, shape and byte range,
// the metadata; then a read of the first and the last bytes of each tensor. Either data or a
// ConfigError/IoError, and no allocation beyond what the file itself holds.
#include <algorithm>
#include <vector>

#include "fuzz_support.h"
#include "zt/error.h"
#include "zt/host/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::input_file("model.safetensors", data, size);
  try {
    const zt::SafetensorsReader reader(path);
    (void)reader.metadata();
    std::vector<char> buffer;
    for (const zt::SafetensorsEntry& entry : reader.entries()) {
      if (reader.find(entry.name) == nullptr) __builtin_trap();  // listed but not found
      const int64_t bytes = entry.end - entry.begin;
      const int64_t take = std::min<int64_t>(bytes, 4096);
      buffer.resize(static_cast<size_t>(std::max<int64_t>(take, 1)));
      reader.read(entry, 0, buffer.data(), take);
      reader.read(entry, bytes - take, buffer.data(), take);
    }
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  return 0;
}
