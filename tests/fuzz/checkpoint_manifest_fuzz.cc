// Fuzz target: a checkpoint folder holding only manifest.json (the input) and its crc32 file
// (made to match, so the manifest's parser is what is fuzzed, not the checksum): the reader
// must refuse it, or accept it and then find its rank files missing, each as a ConfigError or
// IoError naming the folder.
#include "fuzz_support.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zt::fuzz::scratch().reset();
  zt::fuzz::write_manifest("step-00000001", std::string(reinterpret_cast<const char*>(data), size));
  try {
    const zt::CheckpointReader reader(zt::fuzz::scratch().path() + "/step-00000001");
    (void)reader.kinds();
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  return 0;
}
