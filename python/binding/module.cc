// zt._zt: the Python binding of ModuleEngine (module_engine.h), zt's typed errors as Python
// exceptions, and zt's local launcher. The at::Tensor objects Python passes are the very ones
// PyTorch holds (python3-torch runs on the same LibTorch): nothing is copied.
#include <torch/extension.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "data/bpe_tokenizer.h"
#include "data/tokenizer_files.h"
#include "models/gelu.h"
#include "python/binding/data_stream.h"
#include "python/binding/module_engine.h"
#include "settings/job_config.h"
#include "zt/error.h"
#include "zt/host/blas.h"
#include "zt/host/compose.h"
#include "zt/host/launcher.h"
#include "zt/host_memory.h"

namespace py = pybind11;

namespace {

using zt::python::ModuleEngine;

py::dict step_dict(const zt::StepReport& r) {
  py::dict d;
  d["step"] = r.step;
  d["skipped"] = r.skipped;
  d["grad_norm"] = r.grad_norm;
  d["loss_scale"] = r.loss_scale;
  return d;
}

py::dict memory_dict(const zt::MemoryReport& m) {
  py::dict d;
  d["params_gathered"] = m.params_gathered;
  d["params_gathered_peak"] = m.params_gathered_peak;
  d["params_shard"] = m.params_shard;
  d["master_params"] = m.master_params;
  d["optimizer_states"] = m.optimizer_states;
  d["grads"] = m.grads;
  d["persistent_params"] = m.persistent_params;
  d["unit_max_params"] = m.unit_max_params;
  d["offload_optimizer"] = m.offload_optimizer;
  d["offload_param"] = m.offload_param;
  d["offload_staging"] = m.offload_staging;
  d["offload_grads"] = m.offload_grads;
  return d;
}

py::dict times_dict(const zt::EngineTimes& t) {
  py::dict d;
  d["forward_backward"] = t.forward_backward;
  d["step"] = t.step;
  d["optimizer"] = t.optimizer;
  d["comm_wait"] = t.comm_wait;
  d["read_wait"] = t.read_wait;
  d["write_wait"] = t.write_wait;
  return d;
}

// Runs `argv` on `nproc` local ranks under zt's launcher (the trainer's supervision: a rank that
// fails stops the others, naming it). Returns (exit code, failed rank, message, its last line,
// the signal that stopped the launcher or 0).
py::tuple launch(int nproc, const std::vector<std::string>& argv, const std::string& master_addr,
                 int master_port, double timeout_s) {
  zt::LaunchSpec spec;
  spec.nproc = nproc;
  spec.argv = argv;
  spec.master_addr = master_addr;
  spec.master_port = master_port;
  if (timeout_s > 0) {
    spec.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  }
  // As the trainer starts its ranks: OpenBLAS's core and glibc's tunables are read at start.
  for (const auto& var : zt::blas_env_for_children(zt::probe_blas())) spec.env.push_back(var);
  spec.env.push_back(
      {"GLIBC_TUNABLES", zt::glibc_tunables_for_training(zt::glibc_tunables(environ))});
  const std::string job = zt::draw_job_id();
  spec.env.push_back({"ZT_JOB_ID", job});
  // This launcher reads no config: the ranks' rank 0 says what it has to (its warnings).
  spec.env.push_back({zt::trainer::kRank0SpeaksVariable, "1"});
  // The ranks note their file tiers' folders here: this launcher does not read their configs,
  // and a rank killed (SIGKILL: nothing runs) removes none of its files. (One stopped by
  // SIGTERM removes its own, leaving_ranks.h, as does one that leaves at once after an uncaught
  // exception, zt/engine.py; not where the script took SIGTERM for itself.)
  const std::string notes = zt::make_offload_notes_folder();
  if (!notes.empty()) spec.env.push_back({"ZT_OFFLOAD_NOTES", notes});
  zt::LaunchResult r;
  try {
    py::gil_scoped_release released;
    r = zt::launch_local(spec);
  } catch (...) {
    if (!notes.empty()) zt::remove_noted_offload_folders(notes, job);  // no rank started
    throw;
  }
  if (!notes.empty()) {
    for (const std::string& folder : zt::remove_noted_offload_folders(notes, job))
      std::fprintf(stderr, "zt: removed offload files left by stopped ranks: %s\n", folder.c_str());
  }
  return py::make_tuple(r.exit_code, r.failed_rank, r.message, r.error_line, r.launcher_signal);
}

// zt's error kinds as Python exceptions: zt.Error and a subclass per kind.
void def_errors(py::module_& m) {
  static py::exception<zt::Error> error(m, "Error");
  // A ValueError too: what a bad argument raises in Python (tiktoken's disallowed special token,
  // which zt's tokenizer refuses with a ConfigError), so code written for those catches it.
  static py::exception<zt::ConfigError> config_error(
      m, "ConfigError", py::make_tuple(error, py::handle(PyExc_ValueError)));
  static py::exception<zt::PluginError> plugin_error(m, "PluginError", error.ptr());
  static py::exception<zt::CommError> comm_error(m, "CommError", error.ptr());
  static py::exception<zt::IoError> io_error(m, "IoError", error.ptr());
  static py::exception<zt::NumericError> numeric_error(m, "NumericError", error.ptr());
  static py::exception<zt::InternalError> internal_error(m, "InternalError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const zt::ConfigError& e) {
      config_error(e.what());
    } catch (const zt::PluginError& e) {
      plugin_error(e.what());
    } catch (const zt::CommError& e) {
      comm_error(e.what());
    } catch (const zt::IoError& e) {
      io_error(e.what());
    } catch (const zt::NumericError& e) {
      numeric_error(e.what());
    } catch (const zt::InternalError& e) {
      internal_error(e.what());
    } catch (const zt::Error& e) {
      error(e.what());
    } catch (python_error& e) {
      // Raised by Python code autograd ran inside engine.backward (a custom Function's
      // backward, a hook, a checkpoint's recomputed forward): the original exception, its type
      // and traceback, as PyTorch's own bindings give it back (pybind11 made it a RuntimeError,
      // and a Ctrl-C there no KeyboardInterrupt).
      e.restore();
    }
  });
}

// The engine over a Python module's parameters (module_engine.h).
void def_module_engine(py::module_& m) {
  using Release = py::call_guard<py::gil_scoped_release>;
  py::class_<ModuleEngine>(m, "ModuleEngine")
      .def(py::init([](const std::string& config_path, const std::string& toml_text,
                       const std::vector<std::string>& overrides,
                       const std::vector<std::pair<std::string, zt::python::NamedTensors>>& units) {
             std::vector<zt::python::UnitParams> list;
             for (const auto& [name, params] : units) list.push_back({name, params});
             py::gil_scoped_release released;
             return std::make_unique<ModuleEngine>(config_path, toml_text, overrides,
                                                   std::move(list));
           }),
           py::arg("config_path"), py::arg("toml_text"), py::arg("overrides"), py::arg("units"))
      .def("close", &ModuleEngine::close, Release())
      .def_property_readonly("rank", &ModuleEngine::rank)
      .def_property_readonly("world", &ModuleEngine::world)
      .def_property_readonly("grad_accum", &ModuleEngine::grad_accum)
      .def_property_readonly("stage", &ModuleEngine::stage)
      .def_property_readonly("micro_steps", &ModuleEngine::micro_steps)
      .def_property_readonly("steps", &ModuleEngine::steps)
      .def("scheduled_lr", &ModuleEngine::scheduled_lr)
      .def("describe", &ModuleEngine::describe)
      .def("config_toml", &ModuleEngine::config_toml)
      .def_property_readonly("compute", &ModuleEngine::compute)
      .def_property_readonly("device", &ModuleEngine::device)
      .def("begin_forward", &ModuleEngine::begin_forward, Release())
      .def("enter_unit", &ModuleEngine::enter_unit, Release())
      .def("leave_unit", &ModuleEngine::leave_unit, Release())
      .def("backward", &ModuleEngine::backward, Release())
      .def("end_forward", &ModuleEngine::end_forward, Release())
      .def("abort_forward", &ModuleEngine::abort_forward, Release())
      .def(
          "step",
          [](ModuleEngine& e, double lr) {
    zt::StepReport r;
    {
      py::gil_scoped_release released;
      r = e.step(lr);
    }
    return step_dict(r);
          })
      .def("full_param", &ModuleEngine::full_param, Release())
      .def("full_grad", &ModuleEngine::full_grad, Release())
      .def("optimizer_state", &ModuleEngine::optimizer_state, Release())
      .def("parameter_names", &ModuleEngine::parameter_names)
      .def("gathered", &ModuleEngine::gathered, Release())
      .def("write_gathered", &ModuleEngine::write_gathered, Release())
      .def("all_reduce", &ModuleEngine::all_reduce, Release())
      .def("share_buffers", &ModuleEngine::share_buffers, Release())
      .def("memory", [](const ModuleEngine& e) { return memory_dict(e.memory()); })
      .def("times", [](const ModuleEngine& e) { return times_dict(e.times()); })
      .def("save_checkpoint", &ModuleEngine::save_checkpoint, py::arg("dir"),
           py::arg("next_sample"), py::arg("metrics"), py::arg("refusal"), Release())
      .def("load_checkpoint", &ModuleEngine::load_checkpoint, py::arg("path"),
           py::arg("restore_rng"), py::arg("missing_ok"), Release());
}

// A BPE tokenizer (data/bpe_tokenizer.h): what zt.tokenizer() returns and zt.data()'s
// .tokenizer is. Text in as str (UTF-8) or bytes; decode gives str, bad UTF-8 replaced.
void def_tokenizer(py::module_& m) {
  using Tokenizer = zt::data::BpeTokenizer;
  using Ids = std::vector<uint32_t>;
  // str arrives as its UTF-8, bytes as they are. A str with a lone surrogate (json.loads makes
  // them from "\ud800") has no UTF-8: each becomes U+FFFD, as tiktoken's encode does, and a
  // pair written as two escapes is its character.
  const auto text_of = [](const py::object& text) {
    if (py::isinstance<py::str>(text)) {
      try {
        return text.cast<std::string>();
      } catch (const py::cast_error&) {
        return text.attr("encode")("utf-16", "surrogatepass")
            .attr("decode")("utf-16", "replace")
            .cast<std::string>();
      }
    }
    return text.cast<std::string>();
  };
  py::class_<Tokenizer, std::shared_ptr<Tokenizer>>(m, "Tokenizer")
      .def_property_readonly("name", &Tokenizer::name)
      .def_property_readonly("n_vocab", &Tokenizer::vocab_size)
      .def_property_readonly("eot_token",
                             [](const Tokenizer& t) { return t.special_id("<|endoftext|>"); })
      .def(
          "encode_ordinary",
          [text_of](const Tokenizer& t, const py::object& text) {
    const std::string s = text_of(text);
    py::gil_scoped_release released;
    return t.encode_ordinary(s);
          },
          py::arg("text"), "ids of text; special tokens' text is plain text")
      .def(
          "encode",
          [text_of](const Tokenizer& t, const py::object& text, const py::object& allowed,
                    const py::object& disallowed) {
    zt::data::SpecialTokens specials;
    if (py::isinstance<py::str>(allowed)) {
      if (allowed.cast<std::string>() != "all")
        throw py::value_error("allowed_special is \"all\" or a set of special tokens' texts, "
                              "not the string '" +
                              allowed.cast<std::string>() + "'");
      specials.allow_all = true;
    } else if (!allowed.is_none()) {
      // tiktoken's type is a set; any iterable of str does.
      for (const py::handle item : py::iter(allowed))
        specials.allowed.push_back(item.cast<std::string>());
    }
    const std::string s = text_of(text);
    // tiktoken's disallowed_special: "all" (the default) refuses every special token that is
    // not allowed; a collection refuses only those (the rest of the text is plain text, as
    // encode_ordinary reads it), so disallowed_special=() refuses none.
    if (!py::isinstance<py::str>(disallowed)) {
      specials.refuse_others = false;
      for (const py::handle item : py::iter(disallowed)) {
        const std::string token = item.cast<std::string>();
        const bool let = specials.allow_all ||
                         std::find(specials.allowed.begin(), specials.allowed.end(), token) !=
                             specials.allowed.end();
        if (!let && s.find(token) != std::string::npos) {
          throw zt::ConfigError("the text holds the special token " + token +
                                ", which disallowed_special names: allow it (allowed_special), "
                                "or encode it as plain text (encode_ordinary)");
        }
      }
    } else if (disallowed.cast<std::string>() != "all") {
      throw py::value_error("disallowed_special is \"all\" or a collection of special tokens' "
                            "texts, not the string '" +
                            disallowed.cast<std::string>() + "'");
    }
    py::gil_scoped_release released;
    return t.encode(s, specials);
          },
          py::arg("text"), py::arg("allowed_special") = py::none(),
          py::arg("disallowed_special") = "all",
          "tiktoken's encode: allowed special tokens ('all' or a set) become their ids; any "
          "other in the text is a ConfigError, unless disallowed_special (default 'all') leaves "
          "it out (() for none: plain text)")
      .def(
          "decode_bytes",
          [](const Tokenizer& t, const Ids& ids) { return py::bytes(t.decode(ids)); },
          py::arg("ids"))
      .def(
          "decode",
          [](const Tokenizer& t, const Ids& ids) {
    const std::string bytes = t.decode(ids);
    return py::reinterpret_steal<py::str>(
        PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
          },
          py::arg("ids"));
  m.def(
      "tokenizer",
      [](const std::string& name, const std::string& dir) {
    return std::const_pointer_cast<Tokenizer>(zt::data::load_tokenizer(name, dir));
      },
      py::arg("name"), py::arg("dir") = "");
}

}  // namespace

PYBIND11_MODULE(_zt, m) {
  m.doc() = "zt's engine for torch.nn.Module (use the zt package, not this module)";
  def_errors(m);
  def_module_engine(m);
  def_tokenizer(m);

  py::class_<zt::python::DataStream>(m, "DataStream")
      .def(
          py::init<const std::string&, const std::string&, const std::vector<std::string>&, bool>(),
          py::arg("config_path"), py::arg("toml_text"), py::arg("overrides"), py::arg("validation"))
      .def("get", &zt::python::DataStream::get)
      .def("samples", &zt::python::DataStream::samples)
      .def("samples_per_step", &zt::python::DataStream::samples_per_step)
      .def_property_readonly("micro_batch", &zt::python::DataStream::micro_batch)
      .def_property_readonly(
          "tokenizer",
          [](const zt::python::DataStream& d) {
    return std::const_pointer_cast<zt::data::BpeTokenizer>(d.tokenizer());
          })
      .def("describe", &zt::python::DataStream::describe);

  m.def("leave_job", &zt::python::leave_job, py::call_guard<py::gil_scoped_release>(),
        "the departure barrier, once every engine of this process is closed (at exit)");
  m.def("remove_own_offload_files", &zt::remove_own_offload_files,
        py::call_guard<py::gil_scoped_release>(),
        "this rank's offload files, removed by a rank that leaves without closing its engines");

  // Without the GIL, as PyTorch's own ops run: a DataLoader or logging thread goes on meanwhile.
  m.def("gelu_tanh", &zt::models::gelu_tanh, py::arg("x"), py::call_guard<py::gil_scoped_release>(),
        "GELU with the tanh approximation on zt's vectorized kernel (differentiable)");

  m.def("launch", &launch, py::arg("nproc"), py::arg("argv"), py::arg("master_addr"),
        py::arg("master_port"), py::arg("timeout_s"));
}
