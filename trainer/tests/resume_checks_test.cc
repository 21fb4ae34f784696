// What a checkpoint's recorded config says about loading it into this job: model settings the
// tensor shapes cannot tell apart are refused when they differ (they compute another function),
// and a moved validation split is noted (data.val_fraction, and where the held-out part starts),
// as is a data file rewritten since the save.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "data/data_source.h"
#include "run/checkpointing.h"
#include "zt/error.h"

namespace {

std::string model_toml(int n_head, const std::string& activation) {
  return "[model]\nkind = \"gpt\"\nn_head = " + std::to_string(n_head) + "\nactivation = \"" +
         activation + "\"\n[data]\nval_fraction = 0.0\n";
}

}  // namespace

TEST_CASE("a checkpoint trained with other heads or activation is refused, naming both") {
  using zt::trainer::check_same_model;
  CHECK_NOTHROW(check_same_model(model_toml(2, "relu"), model_toml(2, "relu"), "ck/step-4"));
  CHECK_THROWS_WITH_AS(
      check_same_model(model_toml(2, "relu"), model_toml(4, "relu"), "ck/step-4"),
      doctest::Contains("the GPT's attention heads (model.n_head, else its preset's) = 4 in this "
                        "config, but ck/step-4 was trained with 2"),
      zt::ConfigError);
  // A GPT reads no model.activation: another one changes nothing.
  CHECK_NOTHROW(check_same_model(model_toml(2, "relu"), model_toml(2, "gelu"), "ck/step-4"));
  // The MLP does.
  auto mlp = [](const std::string& activation) {
    return "[model]\nkind = \"mlp\"\nactivation = \"" + activation + "\"\n";
  };
  CHECK_THROWS_WITH_AS(check_same_model(mlp("relu"), mlp("gelu"), "ck/step-4"),
                       doctest::Contains("--set model.activation=\"relu\""), zt::ConfigError);
  // Heads as the preset gives them: n_head = 0 under another preset (16 heads, not 12) is
  // refused, and the preset's count written out is the same model.
  auto preset = [](const std::string& name, int n_head) {
    return "[model]\nkind = \"gpt\"\npreset = \"" + name +
           "\"\nn_head = " + std::to_string(n_head) + "\n";
  };
  CHECK_THROWS_WITH_AS(
      check_same_model(preset("gpt2-small", 0), preset("gpt2-medium", 0), "ck/step-4"),
      doctest::Contains("= 16 in this config, but ck/step-4 was trained with 12"), zt::ConfigError);
  CHECK_NOTHROW(check_same_model(preset("gpt2-small", 0), preset("gpt2-small", 12), "ck/step-4"));
  // A checkpoint saved without its config (a Python engine's) is not checked.
  CHECK_NOTHROW(check_same_model("", model_toml(4, "gelu"), "ck/step-4"));
}

TEST_CASE("a moved data.val_fraction is noted, and said to overlap when it grew") {
  using zt::trainer::val_fraction_note;
  const std::string none = model_toml(2, "relu");
  std::string tenth = none;
  tenth.replace(tenth.find("val_fraction = 0.0"), 18, "val_fraction = 0.1");
  CHECK(val_fraction_note(none, none).empty());
  const std::string grew = val_fraction_note(none, tenth);
  CHECK(grew.find("data.val_fraction was 0.0 when this checkpoint trained, now 0.1") !=
        std::string::npos);
  CHECK(grew.find("validation now counts samples it trained on") != std::string::npos);
  CHECK(val_fraction_note(tenth, none).find("counts samples") == std::string::npos);
}

TEST_CASE("a held-out split that moved under the same share is noted, one never recorded only "
          "where it now starts at a document") {
  using zt::trainer::held_out_split_note;
  using zt::trainer::TrainerState;
  const std::string none = model_toml(2, "relu");
  std::string tenth = none;
  tenth.replace(tenth.find("val_fraction = 0.0"), 18, "val_fraction = 0.1");
  TrainerState saved;
  saved.data_split = "token 753 of 1003";
  const zt::data::HeldOutSplit document{"token 802 of 1003, a document's start", true};
  CHECK(held_out_split_note(saved, tenth, {saved.data_split, false}, tenth).empty());
  const std::string moved = held_out_split_note(saved, tenth, document, tenth);
  CHECK(moved.find("held-out part starts at token 802 of 1003, a document's start, but at "
                   "token 753 of 1003 when this checkpoint trained") != std::string::npos);
  // Another share is val_fraction_note's to say, and no share now says nothing.
  CHECK(held_out_split_note(saved, none, document, tenth).empty());
  CHECK(held_out_split_note(saved, tenth, {}, tenth).empty());
  // A checkpoint from before the split was recorded: its zt split at the share's token, so only
  // a part that now starts at a document's start moved.
  std::string old_json = saved.to_json();
  const std::string field = "\"held_out_split\":\"token 753 of 1003\",";
  REQUIRE(old_json.find(field) != std::string::npos);
  old_json.erase(old_json.find(field), field.size());
  const TrainerState unrecorded = TrainerState::from_json(old_json, "ck/step-4");
  CHECK_FALSE(unrecorded.data_split_recorded);
  CHECK(held_out_split_note(unrecorded, tenth, document, tenth)
            .find("split the file at the share's token") != std::string::npos);
  CHECK(held_out_split_note(unrecorded, tenth, {"token 901 of 1001", false}, tenth).empty());
  // A recorded "" (trained without a share) is no old checkpoint: the share moved, which
  // val_fraction_note says.
  TrainerState without = saved;
  without.data_split.clear();
  const TrainerState read_back = TrainerState::from_json(without.to_json(), "ck/step-4");
  CHECK(read_back.data_split_recorded);
  CHECK(held_out_split_note(read_back, none, document, tenth).empty());
  CHECK(TrainerState::from_json(saved.to_json(), "ck/step-4").data_split == saved.data_split);
  // A damaged or foreign state: a negative position (it failed at the first step as an internal
  // error) and a float where a count goes are refused when read, naming the checkpoint.
  TrainerState damaged = saved;
  damaged.next_sample = -8;
  CHECK_THROWS_WITH_AS(TrainerState::from_json(damaged.to_json(), "ck/step-4"),
                       doctest::Contains("checkpoint ck/step-4: its trainer state's "
                                         "\"next_sample\" is -8, not a count from 0 to 2^62"),
                       zt::ConfigError);
  std::string float_step = saved.to_json();
  REQUIRE(float_step.find("\"step\":0") != std::string::npos);
  float_step.replace(float_step.find("\"step\":0"), 8, "\"step\":1e300");
  CHECK_THROWS_WITH_AS(TrainerState::from_json(float_step, "ck/step-4"),
                       doctest::Contains("\"step\" is 1e+300, not a count"), zt::ConfigError);
}

TEST_CASE("a data file rewritten since the checkpoint is noted with its size and time, then and "
          "now, and a copy (another time, the same bytes) is not") {
  using zt::trainer::resume_differences;
  using zt::trainer::TrainerState;
  TrainerState saved;
  saved.data_kind = "text";
  saved.data_path = "a.txt + b.txt";
  saved.next_sample = 96;
  const int64_t t = 1700000000LL * 1000000000LL;  // 2023-11-14 22:13:20 UTC
  saved.data_files = {{"a.txt", 1000, t, "00000000000000aa"}, {"b.txt", 50, t, "00000000000000bb"}};
  TrainerState now = saved;
  CHECK(resume_differences(saved, now).empty());
  // Copied: another time, the same bytes.
  now.data_files[1].modified_ns = t + 7000000000LL;
  CHECK(resume_differences(saved, now).empty());
  now.data_files[1] = {"b.txt", 64, t + 5000000000LL, "00000000000000cc"};
  const std::string note = resume_differences(saved, now);
  INFO(note);
  CHECK(note == "  note: b.txt changed since this checkpoint was saved (then 50 bytes, modified "
                "2023-11-14T22:13:20Z; now 64 bytes, modified 2023-11-14T22:13:25Z): the data "
                "stream goes on at sample 96 of what the file holds now, not of what the run "
                "trained on; put the old file back to continue that run, or start without "
                "--resume to train on this one\n");
  // The same size, other edges: rewritten all the same. Unreadable now: said so.
  now.data_files[1] = {"b.txt", 50, t, "00000000000000cc"};
  CHECK(resume_differences(saved, now).find("b.txt changed") != std::string::npos);
  now.data_files[1] = {"b.txt", -1, 0, ""};
  CHECK(resume_differences(saved, now).find("now unreadable)") != std::string::npos);
  // Other files by name: the data note says that, not this one.
  now.data_path = "c.txt";
  now.data_files = {{"c.txt", 10, t, "00000000000000dd"}};
  const std::string other = resume_differences(saved, now);
  CHECK(other.find("the data differs from the checkpoint's") != std::string::npos);
  CHECK(other.find("changed since") == std::string::npos);
  // Recorded in the checkpoint's JSON, and a state of a zt that recorded none reads as none.
  const TrainerState back = TrainerState::from_json(saved.to_json(), "ck/step-4");
  REQUIRE(back.data_files.size() == 2);
  CHECK(back.data_files[1].path == "b.txt");
  CHECK(back.data_files[1].bytes == 50);
  CHECK(back.data_files[1].modified_ns == t);
  CHECK(back.data_files[1].edges == "00000000000000bb");
  nlohmann::json old = nlohmann::json::parse(saved.to_json());
  REQUIRE(old.at("data").erase("files") == 1);
  CHECK(TrainerState::from_json(old.dump(), "ck/step-4").data_files.empty());
}
