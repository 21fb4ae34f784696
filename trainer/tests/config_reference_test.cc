// Docs that cannot drift: docs/config.md's reference of every config key is the schema itself
// (the core's sections and the trainer's, config_schema()), rendered here. Below the page's
// marker line the text must be exactly what this test renders; where it is not, the test writes
// the rendering beside the build's tests and says how to take it.
#include <doctest/doctest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "settings/trainer_config.h"
#include "zt/host/config.h"
#include "zt/options.h"

namespace {

constexpr const char* kMarker =
    "<!-- Generated from the schema by trainer/tests/config_reference_test.cc: edit the "
    "declarations, not the text below. -->\n";

// A table cell: Markdown's column separator and an HTML tag's opening escaped ("<out_dir>" is
// text, not a tag), and no line break.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '<') out += "&lt;";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

// A number as a reader writes it: 16777216, 0.1, 1e-08 (the shortest text that reads back as
// the same double, where value_to_toml writes 17 digits: 0.10000000000000001).
std::string number(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  char text[64];
  const auto end = std::to_chars(text, text + sizeof(text), x).ptr;
  return std::string(text, end);
}

// A default in TOML, its numbers written as number() does (a float keeps its ".0").
std::string toml_text(const zt::Value& v) {
  if (const double* x = std::get_if<double>(&v)) {
    const std::string n = number(*x);
    return n.find_first_of(".en") == std::string::npos ? n + ".0" : n;
  }
  if (const auto* xs = std::get_if<std::vector<double>>(&v)) {
    std::string out;
    for (const double x : *xs) out += (out.empty() ? "" : ", ") + toml_text(zt::Value(x));
    return "[" + out + "]";
  }
  return zt::value_to_toml(v);
}

std::string allowed(const zt::OptionSpec& o) {
  if (!o.choices.empty()) {
    std::string out;
    for (const auto& c : o.choices) out += (out.empty() ? "" : ", ") + ("`\"" + c + "\"`");
    return out;
  }
  if (o.min && o.max) return number(*o.min) + " to " + number(*o.max);
  if (o.min) return ">= " + number(*o.min);
  if (o.max) return "<= " + number(*o.max);
  return "";
}

std::string rendered_reference() {
  zt::trainer::declare_trainer_config();
  std::string out;
  for (const zt::SectionSpec& section : zt::config_schema()) {
    out += "\n## [" + section.name + "]\n\n";
    if (!section.doc.empty()) out += section.doc + "\n\n";
    out += "| key | type | default | allowed | what it does |\n| --- | --- | --- | --- | --- |\n";
    for (const zt::OptionSpec& o : section.keys) {
      out += "| `" + o.name + "` | " + zt::value_type_name(o.type) + " | `" +
             cell(toml_text(o.default_value)) + "` | " + cell(allowed(o)) + " | " + cell(o.doc) +
             " |\n";
    }
  }
  return out;
}

}  // namespace

TEST_CASE("docs/config.md lists every key of every section with the schema's type, default, "
          "range and doc") {
  const std::string page_path = ZT_TEST_SOURCE_DIR "/docs/config.md";
  std::ifstream in(page_path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << page_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string page = text.str();
  const size_t at = page.find(kMarker);
  REQUIRE_MESSAGE(at != std::string::npos, page_path << " has lost its marker line: " << kMarker);
  const std::string want = rendered_reference();
  const std::string got = page.substr(at + std::string(kMarker).size());
  if (got != want) {
    // The whole page as it should be, to copy over: the hand-written part kept.
    const std::string fixed = std::filesystem::absolute("config.md.expected").string();
    std::ofstream(fixed) << page.substr(0, at) << kMarker << want;
    FAIL_CHECK(page_path << " is not what the config schema says (a key added, renamed or "
                         << "documented anew?); the page as it should be is " << fixed << ": cp "
                         << fixed << " " << page_path);
  }
  // What a reader looks for is there: a key of the core's and one of the trainer's sections.
  CHECK(want.find("| `stage` | integer | `0` | 0 to 3 |") != std::string::npos);
  CHECK(want.find("## [checkpoint]") != std::string::npos);
}
