// Fuzz target: a checkpoint folder holding only manifest.json (the input) and its crc32 file
// (made to match, so the manifest's parser is what is fuzzed, not the checksum): the reader
// must refuse it, or accept it and then find its rank files missing, each as a ConfigError or
// IoError naming the folder.
#include <zlib.h>

#include <cstdio>

#include "fuzz_support.h"
#include "zt/checkpoint.h"
#include "zt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const zt::fuzz::Scratch& scratch = zt::fuzz::scratch();
  scratch.reset();
  const std::string manifest(reinterpret_cast<const char*>(data), size);
  scratch.write("step-00000001/manifest.json", manifest);
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08lx",
                crc32(0, reinterpret_cast<const Bytef*>(manifest.data()),
                      static_cast<uInt>(manifest.size())));
  scratch.write("step-00000001/manifest.json.crc32", crc);
  try {
    const zt::CheckpointReader reader(scratch.path() + "/step-00000001");
    (void)reader.kinds();
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  return 0;
}
