// zt_gathered_check: one rank of the Engine::with_gathered_parameters check
// (tests/multiproc/gathered_test.cc). A small GPT (uneven sizes, the embedding tied to the LM
// head) runs through the ZeRO engine wired as the trainer wires it, next to the same model built
// whole in this process (the reference).
//   --mode edit: a read-only gather hands out exactly the masters (full_fp32_param) and what its
//     function writes goes nowhere; bad arguments and failing functions are refused on every rank
//     with nothing written; then the last rank edits four tensors (scales one, zeroes rows of the
//     tied embedding, fills a bias, replaces another by a new tensor) while the other ranks
//     scribble on their copies, and every master must equal the reference edited the same way,
//     bit for bit.
//   --mode init_from: rank 0 writes another seed's model as a GPT-2 layout safetensors file and
//     models::apply_init_from loads it into the engine: every master equals the file bit for bit;
//     a file of a deeper model is first refused with the Model loader's own message, on every
//     rank, changing nothing.
// Then one training step: each rank's loss equals the reference's on its micro batch (the
// forward sees the new weights) and every master after the step matches LibTorch's AdamW on the
// global batch, within the compute dtype's tolerance. Writes "OK" or the failure to
// $ZT_CHECK_OUT/rank<r>.txt.
//   zt_gathered_check --mode edit|init_from --stage S --shard shard_tensor|shard_bucket
//                     [--dtype fp32|bf16] [--persist T] [--sub_group E]
//                     [--offload_optimizer none|offload_cpu|offload_nvme] [--offload_param ...]
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "models/hf_names.h"
#include "models/init_from.h"
#include "models/model.h"
#include "oracle_tolerance.h"
#include "rank_check.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "zt/error.h"
#include "zt/host/compose.h"
#include "zt/host/config.h"
#include "zt/host/engine.h"
#include "zt/host/process_exit.h"
#include "zt/host/rendezvous.h"
#include "zt/host/safetensors.h"

namespace {

// eps well above rounding noise: the attention's key bias has a gradient that is zero but for
// rounding, which Adam with eps 1e-8 turns into steps of up to lr whose size depends on the
// reduction order.
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.99, kEps = 1e-4, kWeightDecay = 0.05;
constexpr int64_t kMicroBatch = 2;

using zt::test::check;
using zt::test::CheckFailed;
using Named = std::vector<std::pair<std::string, at::Tensor>>;
using Args = std::map<std::string, std::string>;

const std::pair<const char*, const char*> kConfigFlags[] = {
    {"stage", "zero.stage"},
    {"shard", "plugins.shard"},
    {"dtype", "precision.compute"},
    {"persist", "zero.param_persistence_threshold"},
    {"sub_group", "zero.sub_group_size"},
    {"offload_optimizer", "plugins.offload_optimizer"},
    {"offload_param", "plugins.offload_param"}};

// d_model 24 makes a block's shard span several 1024-element tiles of a file tier at world 3.
zt::Config check_config(Args& a, const std::string& out_dir) {
  using zt::value_to_toml;
  const std::string toml =
      "[run]\nseed = 42\n"
      "[model]\nkind = \"gpt\"\npreset = \"custom\"\nn_layer = 2\nn_head = 2\nd_model = 24\n"
      "seq_len = 6\nvocab = 23\ninit_from = " +
      value_to_toml(a["mode"] == "init_from" ? out_dir + "/donor.safetensors" : "") +
      "\n[data]\nmicro_batch = " + std::to_string(kMicroBatch) +
      "\n[plugins]\ncomm = \"comm_ucx\"\noptimizer = \"optim_hybrid_adam\"\n"
      "[plugin.optim_hybrid_adam]\nlr = " +
      value_to_toml(kLr) + "\nbetas = " + value_to_toml(std::vector<double>{kBeta1, kBeta2}) +
      "\neps = " + value_to_toml(kEps) + "\nweight_decay = " + value_to_toml(kWeightDecay) +
      "\nadamw = true\n[plugin.offload_nvme]\npath = " + value_to_toml(out_dir + "/nvme") +
      "\nbuffer_count = 2\nbuffer_mb = 1\nqueue_depth = 4\n";
  std::vector<std::string> overrides;
  for (const auto& [flag, key] : kConfigFlags) {
    const std::string& value = a[flag];
    const bool no_tier = std::string(key).rfind("plugins.offload_", 0) == 0 && value == "none";
    overrides.push_back(std::string(key) + "=" + (no_tier ? "\"\"" : value));
  }
  return zt::trainer::load_config_string(toml, "zt_gathered_check", overrides);
}

// Samples [first, first + count) of one seeded token stream: inputs and next-token targets.
std::pair<at::Tensor, at::Tensor> batch(int64_t first, int64_t count,
                                        const zt::models::ModelShape& shape) {
  std::vector<at::Tensor> xs, ys;
  for (int64_t i = first; i < first + count; ++i) {
    at::Generator gen = at::detail::createCPUGenerator(1000 + i);
    const at::Tensor tokens = at::randint(shape.vocab, {shape.seq_len + 1}, gen, at::kLong);
    xs.push_back(tokens.narrow(0, 0, shape.seq_len));
    ys.push_back(tokens.narrow(0, 1, shape.seq_len));
  }
  return {at::stack(xs), at::stack(ys)};
}

std::vector<at::Tensor> tensors_of(const Named& named) {
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

// The model whole in this process, trained by LibTorch's own AdamW.
struct Reference {
  std::unique_ptr<zt::models::Model> model;
  Named params;  // distinct, in the engine's order
  torch::optim::AdamW adamw;

  Reference(const zt::models::ModelShape& shape, uint64_t seed)
      : model(zt::models::make_model(shape, seed)),
        params(zt::models::unique_parameters(*model)),
        adamw(tensors_of(params), torch::optim::AdamWOptions(kLr)
                                      .betas({kBeta1, kBeta2})
                                      .eps(kEps)
                                      .weight_decay(kWeightDecay)) {}
  std::map<std::string, at::Tensor> by_name() const { return {params.begin(), params.end()}; }
};

// Every master against the reference: bit for bit (`exact`) or within the dtype's tolerance,
// in bf16 also on average (oracle_tolerance.h).
void check_masters(zt::Engine& engine, const Reference& ref, bool exact, at::ScalarType dt,
                   const std::string& when) {
  for (const auto& [name, t] : ref.params) {
    const at::Tensor got = engine.full_fp32_param(name), want = t.detach();
    const bool ok = exact ? at::equal(got, want) : zt::test::excess(got, want, dt) <= 0;
    check(ok, "full_fp32_param(" + name + ") " + when + " differs from the reference by up to " +
                  std::to_string((got - want).abs().max().item<double>()));
    if (exact || dt == at::kFloat) continue;
    const zt::test::MeanError m = zt::test::mean_error(got, want, kLr, false);
    check(m.ok(), "full_fp32_param(" + name + ") " + when + ": " + m.describe());
  }
}

std::vector<std::string> names_of(const Reference& ref) {
  std::vector<std::string> out;
  for (const auto& [name, t] : ref.params) out.push_back(name);
  return out;
}

// A read-only gather: every tensor, in the order asked, equal to the master; what the function
// writes into them must not reach the engine.
void check_read_only(zt::Engine& engine, const Reference& ref) {
  const std::vector<std::string> names = names_of(ref);
  const auto want = ref.by_name();
  std::vector<std::string> seen;
  engine.with_gathered_parameters(names, -1, [&](Named& gathered) {
    for (auto& [name, t] : gathered) {
      seen.push_back(name);
      check(at::equal(t, want.at(name)),
            "the read-only gather of " + name + " differs from the initial values");
      t.mul_(3).add_(1);
    }
  });
  check(seen == names, "the read-only gather did not hand the tensors in the order asked");
  check_masters(engine, ref, true, at::kFloat, "after a read-only gather that scribbled");
}

template <typename E>
void expect_refused(const std::function<void()>& call, const std::string& words) {
  try {
    call();
  } catch (const E& e) {
    check(std::string(e.what()).find(words) != std::string::npos,
          "the refusal does not say '" + words + "': " + e.what());
    return;
  }
  throw CheckFailed("a call that should fail saying '" + words + "' did not fail so");
}

// Bad arguments are refused on every rank before any collective; a function that fails on the
// modifier (or leaves it a tensor of another shape) fails the call on every rank, nothing written.
void check_refusals(zt::Engine& engine, const Reference& ref, int rank, int world) {
  using Call = zt::Engine::GatheredFn;
  const Call none = [](Named&) {};
  auto gathered = [&](std::vector<std::string> names, int modifier, const Call& fn) {
    return [&engine, names, modifier, fn] { engine.with_gathered_parameters(names, modifier, fn); };
  };
  expect_refused<zt::ConfigError>(gathered({"ln_f.bias", "wte.wieght"}, -1, none),
                                  "its parameters are wte.weight, wpe.weight");
  expect_refused<zt::ConfigError>(gathered({"ln_f.bias", "ln_f.bias"}, 0, none), "named twice");
  expect_refused<zt::ConfigError>(gathered({"ln_f.bias"}, world, none), "no rank of this job");
  expect_refused<zt::ConfigError>(gathered({"ln_f.bias"}, -2, none), "no rank of this job");
  const int modifier = world - 1;
  const std::string others = "failed on rank " + std::to_string(modifier);
  const Call throws = [&](Named& p) {
    p[0].second.fill_(9);
    if (rank == modifier) throw std::runtime_error("edit refused by the test");
  };
  if (rank == modifier) {
    expect_refused<std::runtime_error>(gathered({"ln_f.bias"}, modifier, throws), "by the test");
  } else {
    expect_refused<zt::CommError>(gathered({"ln_f.bias"}, modifier, throws), others);
  }
  const Call reshapes = [&](Named& p) { p[1].second = at::zeros({2}); };
  if (rank == modifier) {
    expect_refused<zt::InternalError>(gathered({"ln_f.bias", "wpe.weight"}, modifier, reshapes),
                                      "replaced parameter 'wpe.weight'");
  } else {
    expect_refused<zt::CommError>(gathered({"ln_f.bias", "wpe.weight"}, modifier, reshapes),
                                  others);
  }
  check_masters(engine, ref, true, at::kFloat, "after refused calls");
}

const std::vector<std::string> kEdited = {"wte.weight", "block0.attn.qkv.weight",
                                          "block1.mlp.fc.bias", "ln_f.bias"};

// In place: scales the tied embedding (enough to move the loss well beyond bf16's tolerance)
// and zeroes rows of it, scales another tensor, fills a bias.
void edit_in_place(std::map<std::string, at::Tensor> t) {
  t.at("wte.weight").mul_(10).narrow(0, 3, 6).zero_();
  t.at("block0.attn.qkv.weight").mul_(1.5);
  t.at("block1.mlp.fc.bias").fill_(0.25);
}

// A new tensor (fp64) for ln_f.bias, replacing the one gathered.
at::Tensor pattern_like(const at::Tensor& like) {
  return at::arange(like.numel(), at::kDouble).mul(0.1).sub(1).view(like.sizes());
}

// The last rank edits, the others scribble on their copies (which must not count); the
// reference is edited the same way.
void check_edit(zt::Engine& engine, Reference& ref, int rank, int world) {
  const int modifier = world - 1;
  engine.with_gathered_parameters(kEdited, modifier, [&](Named& gathered) {
    if (rank != modifier) {
      for (auto& [name, t] : gathered) t.fill_(7);
      return;
    }
    edit_in_place({gathered.begin(), gathered.end()});
    gathered[3].second = pattern_like(gathered[3].second);
  });
  {
    c10::NoGradGuard no_grad;
    const auto params = ref.by_name();
    edit_in_place(params);
    params.at("ln_f.bias").copy_(pattern_like(params.at("ln_f.bias")));
  }
  check_masters(engine, ref, true, at::kFloat,
                "after rank " + std::to_string(modifier) + "'s edit");
}

// A model's parameters as a GPT-2 layout safetensors file (F32), as `trainer export` writes one.
void write_hf_file(const std::string& path, const zt::models::Model& model) {
  zt::SafetensorsWriter writer;
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : zt::models::unique_parameters(model)) {
    const zt::models::ExportedName e = zt::models::exported_name("gpt", name);
    values.push_back((e.transpose ? t.t() : t).contiguous());
    writer.add(e.name, "F32", values.back().sizes().vec());
  }
  writer.open(path);
  for (size_t i = 0; i < values.size(); ++i) {
    writer.write(static_cast<int64_t>(i), 0, values[i].data_ptr(), values[i].nbytes());
  }
  writer.close();
}

std::vector<zt::ParamDecl> decls_of(const Reference& ref) {
  std::vector<zt::ParamDecl> out;
  for (const auto& [name, t] : ref.params) out.push_back({name, t.sizes().vec(), {}});
  return out;
}

template <typename E>
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  throw CheckFailed("a file of another model was not refused");
}

// model.init_from through the engine: a deeper model's file is refused as the Model loader
// refuses it; the donor's file loads exactly; the reference loads it with the Model loader.
void check_init_from(zt::Engine& engine, Reference& ref, const zt::trainer::JobSettings& job,
                     zt::PluginCatalog& catalog, zt::Communicator& comm,
                     const std::string& out_dir) {
  const zt::models::ModelShape shape = zt::models::resolve_model_shape(job.model, catalog);
  zt::models::ModelShape deeper_shape = shape;
  deeper_shape.n_layer += 1;
  const Reference donor(shape, 7);
  const std::string donor_path = job.model.init_from;
  const std::string deeper = out_dir + "/deeper.safetensors";
  if (comm.rank() == 0) {
    write_hf_file(donor_path, *donor.model);
    write_hf_file(deeper, *zt::models::make_model(deeper_shape, 7));
  }
  comm.barrier()->wait();
  const std::string want = error_of<zt::ConfigError>(
      [&] { zt::models::load_weights(*ref.model, deeper, "job.toml:3:1"); });
  const std::string got = error_of<zt::ConfigError>([&] {
    zt::models::load_weights(engine, comm, "gpt", decls_of(ref), deeper, "job.toml:3:1",
                             comm.rank());
  });
  check(got == want, "the engine's refusal differs from the Model loader's: " + got);
  check_masters(engine, ref, true, at::kFloat, "after a refused init_from file");
  zt::models::apply_init_from(engine, comm, decls_of(ref), job.model, comm.rank());
  check_masters(engine, donor, true, at::kFloat, "after init_from");
  zt::models::apply_init_from(*ref.model, job.model);
  check_masters(engine, ref, true, at::kFloat, "after init_from (the Model loader's values)");
}

// One step: the losses show the forward used the new weights, the masters the update.
void check_step(zt::Engine& engine, zt::models::Model& mine, Reference& ref, const zt::RankEnv& env,
                at::ScalarType dt) {
  const zt::models::ModelShape& shape = mine.shape;
  auto [x, y] = batch(env.rank * kMicroBatch, kMicroBatch, shape);
  const double loss =
      engine.forward_backward(x, [&](const at::Tensor& out) { return mine.loss(out, y); })
          .item<double>();
  double want = 0;
  {
    c10::NoGradGuard no_grad;
    want = ref.model->loss(zt::models::run_units(*ref.model, x), y).item<double>();
  }
  // bf16: within one bf16 spacing (2^-8) of the loss (measured: 1.8e-3 at most).
  const double tol = dt == at::kFloat ? 1e-5 : std::ldexp(1.0, -8);
  check(std::abs(loss - want) <= tol * std::abs(want),
        "the loss after the edit is " + std::to_string(loss) + ", the reference's " +
            std::to_string(want));
  auto [gx, gy] = batch(0, kMicroBatch * env.world, shape);
  ref.adamw.zero_grad();
  ref.model->loss(zt::models::run_units(*ref.model, gx), gy).backward();
  ref.adamw.step();
  const zt::StepReport report = engine.step(kLr);
  check(!report.skipped, "the step after the edit was skipped");
  check_masters(engine, ref, false, dt, "after a step");
}

std::string run_check(Args& a, const zt::RankEnv& env, const std::string& out_dir) {
  const auto timeout = std::chrono::milliseconds(60000);
  auto store = zt::rendezvous(env.master_addr.empty() ? "127.0.0.1" : env.master_addr,
                              env.master_port, env.rank, env.world, timeout, env.cluster_job);
  const zt::Config config = check_config(a, out_dir);
  const zt::trainer::JobSettings job = zt::trainer::JobSettings::of(config);
  const zt::models::ModelShape shape = zt::models::resolve_model_shape(job.model, config.catalog());
  auto mine = zt::models::make_model(shape, 42);
  std::vector<zt::Unit*> units;
  for (auto& u : mine->units) units.push_back(u.get());
  auto setup = std::make_unique<zt::Composition>(
      zt::compose(job.engine, config.catalog(), env, *store, timeout, units));
  zt::Engine& engine = *setup->engine;
  Reference ref(shape, 42);
  check_read_only(engine, ref);
  if (a["mode"] == "init_from") {
    check_init_from(engine, ref, job, config.catalog(), *setup->comm, out_dir);
  } else {
    check_refusals(engine, ref, env.rank, env.world);
    check_edit(engine, ref, env.rank, env.world);
  }
  check_step(engine, *mine, ref, env, setup->options.compute_dtype);
  return "OK";
}

}  // namespace

static int run_main(int argc, char** argv) {
  Args a{{"mode", "edit"},
         {"stage", "0"},
         {"shard", "shard_tensor"},
         {"dtype", "fp32"},
         {"persist", "0"},
         {"sub_group", "1000000000"},
         {"offload_optimizer", "none"},
         {"offload_param", "none"}};
  for (int i = 1; i + 1 < argc; i += 2) a[std::string(argv[i]).substr(2)] = argv[i + 1];
  const zt::RankEnv env = zt::discover_rank_env();
  const char* out = std::getenv("ZT_CHECK_OUT");
  const std::string out_dir = out ? out : "/tmp";
  return zt::test::run_rank_check(env.rank, [&] { return run_check(a, env, out_dir); });
}

// As the trainer ends its ranks: LibTorch's teardown is most of a forked rank's exit
// (zt/host/process_exit.h).
int main(int argc, char** argv) { zt::exit_without_library_teardown(run_main(argc, argv)); }
