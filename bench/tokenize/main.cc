// zt_bench_tokenize: the text path's speed, side by side in one run (issue targets: zt's encoder
// on one thread >= 3x js-tiktoken and >= 1x WASM tiktoken; prepare-data on 2 cores >= 1.8x its
// 1-core rate; training on a prepared token file no slower per token than on text).
//   encoder   one corpus (Debian's fortunes, then this repository's core/src/*.cc: prose and
//             code) encoded whole by zt on 1 thread and, cut in two at a line, on 2 threads; by
//             js-tiktoken and by tiktoken's WASM build under Node (bench/tokenize/
//             reference_speed.mjs), for gpt2, cl100k_base and o200k_base. MB/s of the corpus.
//   prepare   prepare-data (gpt2) of the fortunes, 16 copies (~41 MB), in 1 MB units, on 1 and 2
//             threads: the whole call (the tokenizer's loading, the syncs) timed.
//   train     the bench GPT (vocab 50304 in both jobs) on README.md's bytes (data.kind = "text")
//             and on the prepared fortunes (data.kind = "tokens"): median step time.
// Prints tables, writes bench-results/tokenize.json; exits non-zero only when a part failed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/bench_util.h"
#include "common/child_process.h"
#include "common/shell.h"
#include "data/bpe_tokenizer.h"
#include "data/prepare_data.h"
#include "data/tokenizer_files.h"
#include "report/run_metrics.h"
#include "zt/error.h"

namespace zt::bench {

namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: zt_bench_tokenize [--reps R] [--train-steps N] [--json PATH]\n"
    "  --reps         timed passes per measurement, the median reported (default 3)\n"
    "  --train-steps  steps per training job (default 12; the first 2 are left out)\n"
    "  --json         results file (default bench-results/tokenize.json)\n";

struct Options {
  int64_t reps = 3, train_steps = 12;
  std::string json = "bench-results/tokenize.json";
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string flag, value;
    if (!next_option(args, i, {"--reps", "--train-steps", "--json"}, kUsage, flag, value)) {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--reps") o.reps = parse_positive(value, flag, kUsage);
    if (flag == "--train-steps") o.train_steps = parse_positive(value, flag, kUsage);
    if (flag == "--json") o.json = value;
  }
  if (o.train_steps < 4)
    throw ConfigError("--train-steps must be at least 4\n" + std::string(kUsage));
  return o;
}

const std::string kFortunes = "/usr/share/games/fortunes";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> fortune_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kFortunes)) {
    if (e.is_regular_file() && !e.is_symlink() && e.path().extension().empty()) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string corpus_text() {
  std::string text;
  for (const fs::path& f : fortune_files()) text += read_all(f);
  std::vector<fs::path> code;
  for (const auto& e : fs::recursive_directory_iterator(ZT_BENCH_SOURCE_DIR "/core/src")) {
    if (e.path().extension() == ".cc") code.push_back(e.path());
  }
  std::sort(code.begin(), code.end());
  for (const fs::path& f : code) text += read_all(f);
  return text;
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median_rate(int64_t reps, double megabytes, const std::function<void()>& f) {
  f();  // warm: pages, caches, PCRE2's JIT scratch
  std::vector<double> rates;
  for (int64_t r = 0; r < reps; ++r) rates.push_back(megabytes / seconds_of(f));
  return median(rates);
}

struct EncoderRow {
  std::string encoding;
  double zt1 = 0, zt2 = 0, js = 0, wasm = 0;
  int64_t tokens = 0;
};

std::vector<EncoderRow> bench_encoder(const Options& o, const std::string& text,
                                      const std::string& corpus_path) {
  const double mb = static_cast<double>(text.size()) / 1e6;
  // Two halves cut after a line break: the second thread's share.
  size_t cut = text.find('\n', text.size() / 2);
  cut = cut == std::string::npos ? text.size() : cut + 1;
  const std::string_view first(text.data(), cut), second(text.data() + cut, text.size() - cut);
  const std::vector<std::string> encodings = {"gpt2", "cl100k_base", "o200k_base"};
  std::vector<EncoderRow> rows;
  for (const std::string& name : encodings) {
    EncoderRow row;
    row.encoding = name;
    const auto tokenizer = data::load_tokenizer(name, "");
    row.tokens = static_cast<int64_t>(tokenizer->encode_ordinary(text).size());
    row.zt1 = median_rate(o.reps, mb, [&] { (void)tokenizer->encode_ordinary(text); });
    row.zt2 = median_rate(o.reps, mb, [&] {
      std::thread other([&] { (void)tokenizer->encode_ordinary(second); });
      (void)tokenizer->encode_ordinary(first);
      other.join();
    });
    rows.push_back(row);
  }
  std::string command = "node " ZT_BENCH_SOURCE_DIR "/bench/tokenize/reference_speed.mjs " +
                        shell_quote(ZT_BENCH_SOURCE_DIR "/.tools") + " " +
                        shell_quote(corpus_path) + " " + std::to_string(o.reps);
  for (const std::string& name : encodings) command += " " + name;
  const ShellResult node = run_shell(command);
  if (node.exit_code != 0) {
    throw IoError("the references did not run (" + command + "):\n" + node.output +
                  "\nscripts/setup.sh installs node, js-tiktoken and tiktoken");
  }
  std::istringstream lines(node.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    for (EncoderRow& row : rows) {
      if (row.encoding != j.at("encoding").get<std::string>()) continue;
      row.js = j.at("js_mb_s").get<double>();
      row.wasm = j.at("wasm_mb_s").get<double>();
      if (j.at("tokens").get<int64_t>() != row.tokens) {
        throw InternalError("zt and js-tiktoken disagree on the corpus's token count for " +
                            row.encoding + " (" + std::to_string(row.tokens) + " vs " +
                            std::to_string(j.at("tokens").get<int64_t>()) +
                            "); run the tokenizer oracle test");
      }
    }
  }
  return rows;
}

struct PrepareRow {
  double mb = 0, one = 0, two = 0;
};

PrepareRow bench_prepare(const Options& o, const std::string& scratch) {
  const fs::path in = fs::path(scratch) / "prepare-in";
  fs::create_directories(in);
  PrepareRow row;
  for (int copy = 0; copy < 16; ++copy) {
    for (const fs::path& f : fortune_files()) {
      const fs::path to = in / (std::to_string(copy) + "-" + f.filename().string());
      fs::copy_file(f, to, fs::copy_options::overwrite_existing);
      row.mb += static_cast<double>(fs::file_size(to)) / 1e6;
    }
  }
  const auto run = [&](int threads) {
    data::PrepareRequest r;
    r.inputs = {in.string()};
    r.out_prefix = scratch + "/prepared-" + std::to_string(threads);
    r.separator = "%";
    r.threads = threads;
    r.unit_bytes = 1 << 20;
    r.overwrite = true;  // each repetition replaces the last one's files
    (void)data::prepare_data(r, nullptr);
  };
  row.one = median_rate(o.reps, row.mb, [&] { run(1); });
  row.two = median_rate(o.reps, row.mb, [&] { run(2); });
  return row;
}

struct TrainRow {
  double text_step_s = 0, tokens_step_s = 0;
};

double median_step_s(const Options& o, const std::string& scratch, const std::string& name,
                     const std::vector<std::string>& sets) {
  const std::string out = scratch + "/" + name;
  std::vector<std::string> more = sets;
  more.push_back("model.vocab=50304");
  const std::string log = out + ".log";
  const int code = run_logged(
      bench_gpt_command(ZT_BENCH_TRAINER, ZT_BENCH_SOURCE_DIR, out, o.train_steps, more), log);
  if (code != 0)
    throw IoError("the " + name + " job failed (exit " + std::to_string(code) + "):\n" +
                  tail_lines(log, 20));
  std::vector<double> steps;
  for (const trainer::StepRecord& s : trainer::read_run_metrics(out).steps) {
    if (s.step > 2) steps.push_back(s.step_time_s);
  }
  return median(steps);
}

TrainRow bench_train(const Options& o, const std::string& scratch) {
  data::PrepareRequest r;
  for (const fs::path& f : fortune_files()) r.inputs.push_back(f.string());
  r.out_prefix = scratch + "/fortunes";
  r.separator = "%";
  r.overwrite = true;  // a scratch folder an earlier bench left
  (void)data::prepare_data(r, nullptr);
  TrainRow row;
  row.text_step_s = median_step_s(o, scratch, "text", {"data.kind=\"text\""});
  row.tokens_step_s = median_step_s(
      o, scratch, "tokens", {"data.kind=\"tokens\"", "data.path=\"" + scratch + "/fortunes.bin\""});
  return row;
}

int run(const std::vector<std::string>& args) {
  // Ctrl-C ends the bench after the job it waits for, its scratch folders removed.
  stop_on_signals();
  const Options o = parse(args);
  if (!fs::exists(kFortunes + "/fortunes")) {
    throw ConfigError("Debian's fortunes are not installed; scripts/setup.sh installs them");
  }
  ScratchDir scratch("zt-bench-tokenize");
  const std::string text = corpus_text();
  const std::string corpus_path = scratch.path() + "/corpus.txt";
  std::ofstream(corpus_path, std::ios::binary) << text;
  std::printf("zt_bench_tokenize: corpus %.2f MB (Debian's fortunes, then core/src/*.cc), %u "
              "cores, median of %lld passes\n",
              static_cast<double>(text.size()) / 1e6, std::thread::hardware_concurrency(),
              static_cast<long long>(o.reps));
  const std::vector<EncoderRow> enc = bench_encoder(o, text, corpus_path);
  std::printf("\nencoder, MB/s      zt 1 thread  zt 2 threads  js-tiktoken  tiktoken (WASM)  "
              "zt/js  zt/WASM\n");
  for (const EncoderRow& r : enc) {
    std::printf("  %-16s %11.2f %13.2f %12.2f %16.2f %6.1fx %7.1fx\n", r.encoding.c_str(), r.zt1,
                r.zt2, r.js, r.wasm, r.zt1 / r.js, r.zt1 / r.wasm);
  }
  std::fflush(stdout);
  const PrepareRow prep = bench_prepare(o, scratch.path());
  std::printf("\nprepare-data (gpt2, %.1f MB of fortunes): 1 thread %.2f MB/s, 2 threads %.2f "
              "MB/s: %.2fx\n",
              prep.mb, prep.one, prep.two, prep.two / prep.one);
  std::fflush(stdout);
  const TrainRow train = bench_train(o, scratch.path());
  std::printf("\ntraining the bench GPT (vocab 50304, 2 ranks, stage 3), median step: text %.3f s, "
              "prepared tokens %.3f s: tokens/text %.3f\n",
              train.text_step_s, train.tokens_step_s, train.tokens_step_s / train.text_step_s);

  nlohmann::json j = {{"corpus_bytes", text.size()}, {"reps", o.reps}};
  for (const EncoderRow& r : enc) {
    j["encoder"].push_back({{"encoding", r.encoding},
                            {"zt_1_thread_mb_s", r.zt1},
                            {"zt_2_threads_mb_s", r.zt2},
                            {"js_tiktoken_mb_s", r.js},
                            {"tiktoken_wasm_mb_s", r.wasm},
                            {"tokens", r.tokens}});
  }
  j["prepare"] = {{"megabytes", prep.mb},
                  {"one_thread_mb_s", prep.one},
                  {"two_threads_mb_s", prep.two},
                  {"speedup", prep.two / prep.one}};
  j["train"] = {{"text_step_s", train.text_step_s}, {"tokens_step_s", train.tokens_step_s}};
  ResultsFile out(o.json);
  out << j.dump(2) << "\n";
  out.commit();
  std::printf("results: %s\n", o.json.c_str());
  return 0;
}

}  // namespace

}  // namespace zt::bench

int main(int argc, char** argv) {
  return zt::bench::bench_main("zt_bench_tokenize", argc, argv, zt::bench::run);
}
