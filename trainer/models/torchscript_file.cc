#include "models/torchscript_file.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>
#include <torch/version.h>

#include <fstream>
#include <sstream>

#include "zt/error.h"

namespace zt::models {

// The line of a LibTorch / TorchScript error that says what went wrong: its last non-empty line
// ("RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x8 and 16x4)"), without the
// interpreter's traceback above it.
std::string torch_error_line(const std::string& what) {
  std::istringstream in(what);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  const size_t start = last.find_first_not_of(" \t");
  return start == std::string::npos ? what : last.substr(start);
}

// What a failure from LibTorch or the TorchScript interpreter (which throws plain
// std::runtime_error) says, without C++ backtraces.
std::string torch_error_text(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  return torch_error_line(c10_error ? c10_error->what_without_backtrace() : e.what());
}

namespace {

// Refuses what torch::jit::load would fail on with a message that says what the file is.
void check_archive(const std::string& path, const std::string& what) {
  if (!std::ifstream(path, std::ios::binary)) {
    throw IoError("cannot read " + what +
                  "; check the path (relative paths start from the "
                  "working directory)");
  }
  const std::string saved_by = "save it with PyTorch <= " TORCH_VERSION
                               " (the LibTorch zt links) or export it again there";
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    if (!reader.hasRecord("constants.pkl")) {
      throw ConfigError(what +
                        " is a torch.save() archive (a state dict or pickled object), not "
                        "a TorchScript module; save it with torch.jit.script(model).save(path)");
    }
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    if (why.find("maximum supported version") != std::string::npos) {
      throw ConfigError(what +
                        " was saved by a newer PyTorch than LibTorch " TORCH_VERSION " reads (" +
                        torch_error_line(why) + "); " + saved_by);
    }
    throw ConfigError(what + " is not a TorchScript file (" + torch_error_line(why) +
                      "); save the module with torch.jit.script(model).save(path)");
  }
}

}  // namespace

torch::jit::Module load_torchscript_file(const std::string& path, const std::string& what) {
  check_archive(path, what);
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    throw ConfigError(what + ": LibTorch " TORCH_VERSION " cannot load it: " + torch_error_text(e) +
                      "; a module saved by a newer PyTorch may use operators this version lacks: "
                      "save it with PyTorch <= " TORCH_VERSION);
  }
}

}  // namespace zt::models
