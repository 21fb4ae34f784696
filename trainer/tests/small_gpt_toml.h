// The start of the trainer tests' job: a GPT of 2 blocks, d_model 64, 2 heads, 32 positions, 256
// symbols, on 2 ranks: per block 12 x 64^2 + 13 x 64 = 49,984 elements, embedding (256 + 32) x
// 64 = 18,432, head 2 x 64 (+ the tied wte, 16,384): 118,528 parameters in 28 tensors. Units use
// 18,432 / 49,984 / 49,984 / 16,512. A test appends its [data], [zero], [plugins] (11 lines here,
// so what it appends starts on line 12).
#pragma once

#define ZT_SMALL_GPT_TOML \
  "[run]\n"               \
  "steps = 1\n"           \
  "[launch]\n"            \
  "nproc = 2\n"           \
  "[model]\n"             \
  "preset = \"custom\"\n" \
  "n_layer = 2\n"         \
  "n_head = 2\n"          \
  "d_model = 64\n"        \
  "seq_len = 32\n"        \
  "vocab = 256\n"
