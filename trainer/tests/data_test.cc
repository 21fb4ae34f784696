// The data sources: determinism, rank slices that concatenate to the single-process batch, file
// windows that are the file's content, and an error naming the file for every bad input.
#include <unistd.h>

#include <ATen/ATen.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "data/data_source.h"
#include "settings/job_settings.h"
#include "settings/trainer_config.h"
#include "zt/error.h"

namespace fs = std::filesystem;
using zt::data::Batch;

namespace {

zt::Config config_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  return zt::trainer::load_config_string("[run]\ntask = \"smoke\"\n[plugins]\ncomm = \"\"\n" + toml,
                                         "test.toml", overrides);
}

// What the [model] of `config` takes (the mlp: vectors of its width; the gpt: its tokens), read
// here so the data layer is tested without the models above it.
zt::ModelInputs inputs_of(const zt::Config& config) {
  const zt::Options& model = config.section("model");
  zt::ModelInputs in;
  if (model.get_string("kind") == "mlp") {
    in.tokens = false;
    in.input_shape = in.target_shape = {model.get_int("width")};
  } else {
    in.seq_len = model.get_int("seq_len");
    // Unset, the models layer resolves it to byte-level text's 256 symbols (what these tests
    // read when they set none).
    in.vocab = model.get_int("vocab") > 0 ? model.get_int("vocab") : 256;
  }
  return in;
}

std::unique_ptr<zt::data::DataSource> data_of(const std::string& toml,
                                              const std::vector<std::string>& overrides = {}) {
  zt::Config config = config_of(toml, overrides);
  return zt::data::make_data(zt::trainer::JobSettings::of(config).data, inputs_of(config),
                             config.section("model").get_string("kind"));
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool same(const Batch& a, const Batch& b) {
  return at::equal(a.input, b.input) && at::equal(a.target, b.target);
}

Batch concat(const std::vector<Batch>& parts) {
  std::vector<at::Tensor> in, tg;
  for (const auto& p : parts) {
    in.push_back(p.input);
    tg.push_back(p.target);
  }
  return {at::cat(in), at::cat(tg)};
}

// A folder of its own per test process, removed at exit.
struct TempDir {
  fs::path path = fs::temp_directory_path() / ("zt_trainer_data_test_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& bytes) const {
    fs::path p = path / name;
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
};

template <typename T>
std::string as_bytes(const std::vector<T>& tokens) {
  return std::string(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(T));
}

// Every row must be the file's tokens at some offset, the target row the same one further on.
void check_windows(const Batch& batch, const std::vector<int64_t>& stream) {
  const int64_t t = batch.input.size(1);
  for (int64_t row = 0; row < batch.input.size(0); ++row) {
    const int64_t* in = batch.input[row].data_ptr<int64_t>();
    const int64_t* tg = batch.target[row].data_ptr<int64_t>();
    bool found = false;
    for (size_t start = 0; start + t < stream.size() && !found; ++start) {
      found = std::equal(in, in + t, stream.begin() + start) &&
              std::equal(tg, tg + t, stream.begin() + start + 1);
    }
    INFO("row " << row);
    CHECK(found);
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zt::Error& e) {
    return std::string(e.kind_name()) + ": " + e.what();
  }
  return "";
}

const char* kGpt =
    "[model]\npreset = \"custom\"\nn_layer = 1\nn_head = 1\nd_model = 8\nseq_len = 12\n";

}  // namespace

TEST_CASE("synthetic tokens are deterministic, in range, and target = input shifted by one") {
  std::string toml = std::string(kGpt) + "vocab = 50\n[data]\nmicro_batch = 3\ngrad_accum = 2\n";
  auto a = data_of(toml), b = data_of(toml), other = data_of(toml, {"run.seed=5"});
  Batch x = a->get(12, 1, 0, 1);
  CHECK(x.input.sizes() == at::IntArrayRef({3, 12}));
  CHECK((x.input.scalar_type() == at::kLong));
  CHECK(same(x, b->get(12, 1, 0, 1)));
  CHECK(same(x, a->get_samples(15, 3)));  // micro step 1 of 1 rank: 3 samples after the first 3
  CHECK_FALSE(at::equal(x.input, a->get(12, 0, 0, 1).input));
  CHECK_FALSE(at::equal(x.input, a->get(18, 1, 0, 1).input));
  CHECK_FALSE(at::equal(x.input, other->get(12, 1, 0, 1).input));
  CHECK(at::equal(x.input.narrow(1, 1, 11), x.target.narrow(1, 0, 11)));
  Batch big = a->get_samples(0, 64);
  CHECK(big.input.min().item<int64_t>() >= 0);
  CHECK(big.input.max().item<int64_t>() == 49);  // 768 draws of 50 values reach the top
  CHECK_THROWS_AS(a->get(0, 2, 0, 1), zt::InternalError);
  CHECK_THROWS_AS(a->get(0, 0, 2, 2), zt::InternalError);
  CHECK_THROWS_AS(a->get_samples(-1, 2), zt::InternalError);
}

TEST_CASE("synthetic vectors for the mlp are deterministic float [batch, width]") {
  std::string toml = "[model]\nkind = \"mlp\"\nwidth = 7\n[data]\nmicro_batch = 2\n";
  auto a = data_of(toml), b = data_of(toml);
  Batch x = a->get(0, 0, 1, 2);
  CHECK(x.input.sizes() == at::IntArrayRef({2, 7}));
  CHECK(x.target.sizes() == at::IntArrayRef({2, 7}));
  CHECK((x.input.scalar_type() == at::kFloat));
  CHECK(same(x, b->get(0, 0, 1, 2)));
  CHECK_FALSE(at::equal(x.input, x.target));
  CHECK_FALSE(at::equal(x.input, a->get(0, 0, 0, 2).input));
}

TEST_CASE("rank slices concatenate to the single-process global batch, for every world size") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 3000; ++i) text += static_cast<char>('a' + (i * 7 + i / 13) % 26);
  std::string path = dir.write("corpus.txt", text);
  const std::vector<std::string> tomls = {
      std::string(kGpt) + "vocab = 300\n[data]\nmicro_batch = 2\ngrad_accum = 3\n",
      "[model]\nkind = \"mlp\"\nwidth = 5\n[data]\nmicro_batch = 2\ngrad_accum = 3\n",
      std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" + path +
          "'\nmicro_batch = 2\ngrad_accum = 3\n"};
  for (const auto& toml : tomls) {
    auto source = data_of(toml);
    for (int world : {1, 2, 3, 4}) {
      const int64_t start = 7 * source->samples_per_step(world);  // step 7's global batch
      // A reference process with world * micro_batch samples per micro step sees the same batch.
      auto reference = data_of(toml, {"data.micro_batch=" + std::to_string(2 * world)});
      for (int micro = 0; micro < 3; ++micro) {
        std::vector<Batch> parts;
        for (int rank = 0; rank < world; ++rank)
          parts.push_back(source->get(start, micro, rank, world));
        Batch joined = concat(parts);
        INFO(toml << " world " << world << " micro " << micro);
        CHECK(same(joined, source->global_batch(start, micro, world)));
        CHECK(same(joined, reference->get(start, micro, 0, 1)));
        CHECK(same(joined, source->get_samples(start + micro * 2 * world, 2 * world)));
      }
    }
  }
}

TEST_CASE("a step trains on the same samples however its global batch is split") {
  // Global batch 12: 1 rank x 6 micro steps, 2 x 3, 3 x 2, 6 x 1, all with micro_batch 2.
  const std::string toml = std::string(kGpt) + "vocab = 300\n[data]\nmicro_batch = 2\n";
  auto all_of_step = [&](int world, int accum, int64_t step) {
    auto source = data_of(toml, {"data.grad_accum=" + std::to_string(accum)});
    const int64_t start = step * source->samples_per_step(world);
    std::vector<Batch> parts;
    for (int micro = 0; micro < accum; ++micro) {
      for (int rank = 0; rank < world; ++rank)
        parts.push_back(source->get(start, micro, rank, world));
    }
    return concat(parts);
  };
  for (int64_t step : {0, 5}) {
    const Batch one = all_of_step(1, 6, step);
    CHECK(one.input.size(0) == 12);
    CHECK(same(one, all_of_step(2, 3, step)));
    CHECK(same(one, all_of_step(3, 2, step)));
    CHECK(same(one, all_of_step(6, 1, step)));
  }
  CHECK_FALSE(at::equal(all_of_step(1, 6, 0).input, all_of_step(1, 6, 1).input));
}

TEST_CASE("text windows are the file's bytes") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 500; ++i) text += static_cast<char>((i * 37 + i / 7) % 256);
  std::string path = dir.write("bytes.bin", text);
  auto source = data_of(std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" + path + "'\n");
  std::vector<int64_t> stream(text.begin(), text.end());
  for (auto& v : stream) v &= 0xff;
  Batch b = source->get_samples(60, 20);
  CHECK(b.input.sizes() == at::IntArrayRef({20, 12}));
  check_windows(b, stream);
  CHECK(contains(source->describe(), path));

  // A file of exactly seq_len + 1 bytes has one window: the whole file.
  std::string exact = text.substr(0, 13);
  auto one = data_of(std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" +
                     dir.write("exact.txt", exact) + "'\n");
  Batch w = one->get(9, 0, 1, 2);
  for (int64_t row = 0; row < w.input.size(0); ++row) {
    for (int64_t j = 0; j < 12; ++j) {
      CHECK(w.input[row][j].item<int64_t>() == static_cast<unsigned char>(exact[j]));
      CHECK(w.target[row][j].item<int64_t>() == static_cast<unsigned char>(exact[j + 1]));
    }
  }
}

TEST_CASE("tokens windows decode uint16 and uint32 files") {
  TempDir dir;
  std::vector<uint16_t> t16;
  std::vector<uint32_t> t32;
  std::vector<int64_t> s16, s32;
  for (int i = 0; i < 400; ++i) {
    t16.push_back(static_cast<uint16_t>((i * 7919) % 60000));
    s16.push_back(t16.back());
    t32.push_back(static_cast<uint32_t>((i * 104729) % 150000));
    s32.push_back(t32.back());
  }
  auto a = data_of(std::string(kGpt) + "vocab = 60000\n[data]\nkind = \"tokens\"\npath = '" +
                   dir.write("t16.bin", as_bytes(t16)) + "'\n");
  Batch b16 = a->get_samples(16, 16);
  check_windows(b16, s16);
  CHECK(b16.input.max().item<int64_t>() > 255);
  auto b = data_of(std::string(kGpt) +
                   "vocab = 150000\n[data]\nkind = \"tokens\"\n"
                   "token_dtype = \"uint32\"\npath = '" +
                   dir.write("t32.bin", as_bytes(t32)) + "'\n");
  Batch b32 = b->get_samples(16, 16);
  check_windows(b32, s32);
  CHECK(b32.input.max().item<int64_t>() > 65535);
}

TEST_CASE("every bad data file is a clear error naming it") {
  TempDir dir;
  const std::string gpt = std::string(kGpt) + "vocab = 1000\n";
  auto tokens_of = [&](const std::string& path, const char* dtype = "uint16") {
    return gpt + "[data]\nkind = \"tokens\"\ntoken_dtype = \"" + dtype + "\"\npath = '" + path +
           "'\n";
  };

  std::string missing = (dir.path / "missing.bin").string();
  std::string e = error_of([&] { data_of(tokens_of(missing)); });
  CHECK(contains(e, "io: cannot open tokens file '" + missing + "'"));
  CHECK(contains(e, "No such file"));
  CHECK(contains(e, "test.toml:"));

  e = error_of(
      [&] { data_of(gpt + "[data]\nkind = \"text\"\npath = '" + dir.path.string() + "'\n"); });
  CHECK(contains(e, "io: cannot read text file '" + dir.path.string() + "'"));
  CHECK(contains(e, "directory"));

  std::string short_text = dir.write("short.txt", "hello");
  e = error_of([&] { data_of(gpt + "[data]\nkind = \"text\"\npath = '" + short_text + "'\n"); });
  CHECK(contains(e, "config: text file '" + short_text + "'"));
  CHECK(contains(e, "holds 5 tokens, but one sample needs seq_len + 1 = 13"));

  std::string empty = dir.write("empty.bin", "");
  e = error_of([&] { data_of(tokens_of(empty)); });
  CHECK(contains(e, "config: tokens file '" + empty + "'"));
  CHECK(contains(e, "holds 0 tokens"));

  std::string odd = dir.write("odd.bin", std::string(41, '\0'));
  e = error_of([&] { data_of(tokens_of(odd)); });
  CHECK(contains(e, "config: tokens file '" + odd + "'"));
  CHECK(contains(e, "41 bytes, not a whole number of 2-byte tokens"));
  std::string six = dir.write("six.bin", std::string(58, '\0'));
  e = error_of([&] { data_of(tokens_of(six, "uint32")); });
  CHECK(contains(e, "58 bytes, not a whole number of 4-byte tokens"));

  std::vector<uint16_t> bad(13, 3);
  bad[6] = 1000;
  std::string big = dir.write("big_id.bin", as_bytes(bad));
  auto source = data_of(tokens_of(big));  // opening succeeds: ids are checked as windows are read
  e = error_of([&] { source->get(0, 0, 0, 1); });
  CHECK(contains(e, "config: tokens file '" + big + "'"));
  CHECK(contains(e, "token 1000 at index 6 is >= the model's vocab 1000"));

  // Text given as tokens (nanoGPT's input.txt, even in size, every byte pair below the vocab):
  // refused, saying what it is and both ways out.
  std::string prose;
  while (prose.size() < 5000) prose += "First Citizen:\nBefore we proceed any further, hear me.\n";
  const std::string as_tokens = dir.write("input.txt", prose.substr(0, 5000));
  e = error_of([&] {
    data_of(std::string(kGpt) + "vocab = 50304\n[data]\nkind = \"tokens\"\npath = '" + as_tokens +
            "'\n");
  });
  CHECK(contains(e, as_tokens + " (data.path, test.toml:"));
  CHECK(contains(e, "reads as text, not token ids"));
  CHECK(contains(e, "set data.kind = \"text\""));
  CHECK(contains(e, "trainer prepare-data " + as_tokens));

  std::string text = dir.write("text.txt", std::string(20, 'z'));
  e = error_of([&] {
    data_of("[model]\nkind = \"mlp\"\n[data]\nkind = \"text\"\npath = '" + text + "'\n");
  });
  CHECK(contains(e, "config: test.toml:"));
  CHECK(contains(e, "model.kind = \"mlp\""));
}

TEST_CASE("validation data: a held-out tail no training window reaches, a file, or a stream") {
  TempDir dir;
  // 900 'a's then 100 'b's: data.val_fraction = 0.1 holds out exactly the b's.
  const std::string path = dir.write("ab.txt", std::string(900, 'a') + std::string(100, 'b'));
  const std::string toml = std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" + path +
                           "'\nval_fraction = 0.1\n";
  zt::Config config = config_of(toml);
  const auto settings = zt::trainer::JobSettings::of(config).data;
  auto train = zt::data::make_data(settings, inputs_of(config), "gpt");
  auto val = zt::data::make_val_data(settings, inputs_of(config), "gpt", 3);
  CHECK(val->micro_batch() == 3);
  // Every training window (input and target, so every token it reads) lies in the head.
  const Batch t = train->get_samples(0, 2000);
  CHECK(t.input.eq('a').all().item<bool>());
  CHECK(t.target.eq('a').all().item<bool>());
  const Batch v = val->get_samples(0, 500);
  CHECK(v.input.eq('b').all().item<bool>());
  CHECK(v.target.eq('b').all().item<bool>());
  // The same samples every time they are asked for.
  CHECK(same(val->get_samples(7, 5), val->get_samples(7, 5)));

  // data.val_path: windows of that file.
  const std::string other = dir.write("val.txt", std::string(200, 'v'));
  zt::Config with_file = config_of(std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" + path +
                                   "'\nval_path = '" + other + "'\n");
  auto from_file = zt::data::make_val_data(zt::trainer::JobSettings::of(with_file).data,
                                           inputs_of(with_file), "gpt", 2);
  CHECK(from_file->get_samples(0, 50).input.eq('v').all().item<bool>());
  CHECK(contains(from_file->describe(), "data.val_path"));

  // Synthetic data: a stream of its own, not the training samples.
  zt::Config synthetic = config_of(kGpt);
  const auto s = zt::trainer::JobSettings::of(synthetic).data;
  auto train_s = zt::data::make_data(s, inputs_of(synthetic), "gpt");
  auto val_s = zt::data::make_val_data(s, inputs_of(synthetic), "gpt", 4);
  CHECK_FALSE(same(train_s->get_samples(0, 4), val_s->get_samples(0, 4)));
  CHECK(same(val_s->get_samples(0, 4), val_s->get_samples(0, 4)));

  // A held-out part too small for one sample (seq_len + 1 = 13 tokens) is refused, named.
  const std::string tiny = dir.write("tiny.txt", std::string(100, 'x'));
  zt::Config small = config_of(std::string(kGpt) + "[data]\nkind = \"text\"\npath = '" + tiny +
                               "'\nval_fraction = 0.05\n");
  const std::string e = error_of([&] {
    zt::data::make_val_data(zt::trainer::JobSettings::of(small).data, inputs_of(small), "gpt", 1);
  });
  CHECK(contains(e, "config: "));
  CHECK(contains(e, "data.val_fraction's held-out part) holds 5 tokens"));
  CHECK(contains(e, tiny));
}
