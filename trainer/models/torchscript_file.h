// A TorchScript file as LibTorch loads it, with the errors a user can act on: a file that is
// missing, a torch.save() archive rather than a scripted module, a newer PyTorch's; and the one
// line of a LibTorch or TorchScript error that says what went wrong.
// Thread safety: pure functions of their arguments and the file.
#pragma once

#include <torch/script.h>

#include <exception>
#include <string>

namespace zt::models {

// The last non-empty line of a LibTorch / TorchScript error ("RuntimeError: mat1 and mat2
// shapes cannot be multiplied (4x8 and 16x4)"), without the interpreter's traceback above it.
std::string torch_error_line(const std::string& what);
// What a failure from LibTorch or the TorchScript interpreter (which throws plain
// std::runtime_error) says, without C++ backtraces.
std::string torch_error_text(const std::exception& e);

// Loads the module at `path` on the CPU; `what` names it in messages ("model.path = ... (where)").
// Throws IoError for a file that cannot be read, ConfigError for one that is not a TorchScript
// module, was saved by a newer PyTorch, or that this LibTorch cannot load.
torch::jit::Module load_torchscript_file(const std::string& path, const std::string& what);

}  // namespace zt::models
