// The trainer command line the multi-process tests build on: the shipped stage-3 config (2 ranks,
// shard_bucket, comm_ucx) shrunk to a GPT of 2 layers, d_model 64, 2 heads and seq_len 32, so a
// step takes milliseconds. Tests add what they vary as --set overrides in `extra`.
#pragma once

#include <string>

namespace zt::test {

// Trains on `data` (tests/data/corpus.txt unless given) and writes to `out_dir`.
inline std::string small_gpt_job(const std::string& out_dir, const std::string& extra = "",
                                 const std::string& data = ZT_TEST_CORPUS) {
  return std::string(ZT_TEST_TRAINER) +
         " --config " ZT_TEST_SOURCE_DIR "/configs/zero3.toml --set data.path=" + data +
         " --set model.n_layer=2 --set model.d_model=64 --set model.n_head=2 "
         "--set model.seq_len=32 --set run.out_dir=" +
         out_dir + " " + extra;
}

// The same job without its per-step log lines (the checkpoint tests read what the job prints).
inline std::string quiet_small_gpt_job(const std::string& out_dir, const std::string& extra = "") {
  return small_gpt_job(out_dir, "--set run.log_every=1000 " + extra);
}

// A shell command: `job` (logging every 100 steps) in the background, output to `log`; SIGUSR2
// to its process (one rank's, or its launcher's) once it logged step 100; then its exit code, as
// "exit=N".
inline std::string sigusr2_after_step_100(const std::string& job, const std::string& log) {
  return "(" + job + " > " + log + " 2>&1 & pid=$!; for i in $(seq 200); do grep -q 'step 100/' " +
         log + " 2>/dev/null && break; sleep 0.1; done; kill -USR2 $pid; wait $pid; echo exit=$?)";
}

}  // namespace zt::test
