// The analytic FLOPs behind MFU (models/flops.h), against counts derived another way: GPT-2
// small's published parameter total less what does no matmul, and the MLP's layers by hand.
#include <doctest/doctest.h>

#include "models/flops.h"

using zt::models::ModelShape;
using zt::models::training_flops_per_sample;

TEST_CASE("flops: GPT-2 small is 6 x its matmul parameters plus attention, per token") {
  ModelShape gpt2;
  gpt2.kind = "gpt";
  gpt2.n_layer = 12;
  gpt2.n_head = 12;
  gpt2.d_model = 768;
  gpt2.seq_len = 1024;
  gpt2.vocab = 50257;
  // Hugging Face's gpt2 has 124,439,808 parameters; position embeddings (1024 x 768), each
  // block's biases and layer norms (13 x 768) and the final layer norm (2 x 768) do no matmul.
  const double matmul = 124'439'808.0 - 1024 * 768 - 12 * 13 * 768 - 2 * 768;
  CHECK(matmul == 123'532'032.0);
  const double attention = 12.0 * 12 * 1024 * 768;  // scores and weighted sums, per token
  CHECK(training_flops_per_sample(gpt2) == 1024 * (6 * matmul + attention));
}

TEST_CASE("flops: an MLP is 6 x width^2 per layer, and models that do not say are 0") {
  ModelShape mlp;
  mlp.kind = "mlp";
  mlp.width = 256;
  mlp.depth = 3;
  // Per layer: forward 2 w^2 (a multiply and an add per weight), backward twice that.
  CHECK(training_flops_per_sample(mlp) == 3 * (2.0 + 4.0) * 256 * 256);
  ModelShape script;
  script.kind = "torchscript";
  CHECK(training_flops_per_sample(script) == 0);
}
