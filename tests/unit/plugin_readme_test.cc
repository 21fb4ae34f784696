// Docs that cannot drift: every plugin's README.md lists exactly the options the plugin declares
// (what `trainer plugins describe <id>` prints), read from the built plugin itself.
//
// The README convention this test parses: a level-2 heading that starts with "## Options",
// then, before the next "## " heading, a Markdown table whose header row is followed by a
// `| --- |` separator and whose data rows start with the option name in backticks:
//
//   ## Options (`[plugin.<id>]`)
//
//   | option | default | what it trades |
//   | --- | --- | --- |
//   | `chunk_kb` | 1024 | ... |
//
// A plugin without options writes the heading and no table ("None: ...").
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util.h"
#include "zt/host/plugin_loader.h"

namespace fs = std::filesystem;

namespace {

struct ReadmeOptions {
  bool has_section = false;
  std::vector<std::string> names;     // in table order, duplicates kept
  std::vector<std::string> problems;  // rows that break the convention
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool is_separator_row(const std::string& line) {
  return line.size() > 2 && line.find("---") != std::string::npos &&
         line.find_first_not_of("|-: \t\r") == std::string::npos;
}

// The first cell of a table row: "| `name` | ..." -> "`name`".
std::string first_cell(const std::string& row) {
  const size_t end = row.find('|', 1);
  return trim(row.substr(1, end == std::string::npos ? std::string::npos : end - 1));
}

ReadmeOptions parse_readme_options(const std::string& text) {
  ReadmeOptions out;
  std::istringstream in(text);
  std::string line;
  bool in_section = false;
  bool in_code = false;            // inside a ``` fence, where "# " is a comment, not a heading
  std::vector<std::string> table;  // the rows of the table being read
  auto flush = [&] {
    if (table.size() >= 2 && is_separator_row(table[1])) {
      for (size_t i = 2; i < table.size(); ++i) {
        const std::string cell = first_cell(table[i]);
        if (cell.size() > 2 && cell.front() == '`' && cell.back() == '`' &&
            cell.find('`', 1) == cell.size() - 1) {
          out.names.push_back(cell.substr(1, cell.size() - 2));
        } else {
          out.problems.push_back("row without a `name` in its first cell: " + table[i]);
        }
      }
    } else if (!table.empty()) {
      out.problems.push_back("a table without a header and `| --- |` separator: " + table[0]);
    }
    table.clear();
  };
  while (std::getline(in, line)) {
    if (trim(line).rfind("```", 0) == 0) {
      flush();
      in_code = !in_code;
      continue;
    }
    if (in_code) continue;
    if (line.rfind("## ", 0) == 0 || line.rfind("# ", 0) == 0) {
      flush();
      in_section = line.rfind("## Options", 0) == 0;
      out.has_section = out.has_section || in_section;
      continue;
    }
    if (!in_section) continue;
    if (trim(line).rfind('|', 0) == 0) {
      table.push_back(trim(line));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// The plugin folders of the source tree: every plugins/<id>/ with a CMakeLists.txt.
std::vector<std::string> source_plugin_ids() {
  std::vector<std::string> ids;
  for (const auto& entry : fs::directory_iterator(fs::path(ZT_TEST_SOURCE_DIR) / "plugins")) {
    if (entry.is_directory() && fs::exists(entry.path() / "CMakeLists.txt")) {
      ids.push_back(entry.path().filename().string());
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace

TEST_CASE("the README parser finds the option names, and only under the Options heading") {
  const std::string text =
      "# p\n\n## Layout\n\n| key | x |\n| --- | --- |\n| `not_an_option` | 1 |\n\n"
      "## Options (`[plugin.p]`)\n\nIntro.\n\n"
      "| option | default | what |\n| --- | --- | --- |\n| `alpha` | 1 | a |\n| `beta` | x | b |\n"
      "\n```sh\n# a comment, not a heading\n```\n| option | d |\n| --- | --- |\n| `delta` | 3 |\n"
      "\nA note.\n\n## Tests\n\n| `gamma` | 2 |\n";
  ReadmeOptions r = parse_readme_options(text);
  CHECK(r.has_section);
  CHECK(r.problems.empty());
  CHECK(r.names == std::vector<std::string>{"alpha", "beta", "delta"});

  ReadmeOptions none = parse_readme_options("# p\n\n## Options\n\nNone: nothing to set.\n");
  CHECK(none.has_section);
  CHECK(none.names.empty());

  CHECK_FALSE(parse_readme_options("# p\n\n## Usage\n").has_section);

  ReadmeOptions bad = parse_readme_options(
      "## Options\n\n| option | d |\n| --- | --- |\n| alpha | 1 |\n| `a` `b` | 2 |\n");
  CHECK(bad.names.empty());
  CHECK(bad.problems.size() == 2);
}

TEST_CASE("every built plugin's README lists exactly the options it declares, and an unbuilt "
          "one's (comm_nccl without CUDA) is checked for form") {
  zt::PluginCatalog catalog;
  const std::vector<std::string> ids = source_plugin_ids();
  REQUIRE_FALSE(ids.empty());
  for (const auto& id : ids) {
    const fs::path readme = fs::path(ZT_TEST_SOURCE_DIR) / "plugins" / id / "README.md";
    INFO("plugin ", id, ", ", readme.string());
    REQUIRE_MESSAGE(fs::exists(readme), "every plugin folder has a README.md");
    const ReadmeOptions listed = parse_readme_options(zt::test::read_file(readme));
    CHECK_MESSAGE(listed.has_section, "no '## Options' heading");
    CHECK_MESSAGE(listed.problems.empty(), join(listed.problems));

    // ZT_TEST_UNBUILT_PLUGINS: ",id,id," of the folders this build did not build.
    if (std::string(ZT_TEST_UNBUILT_PLUGINS).find("," + id + ",") != std::string::npos) {
      MESSAGE("plugin ", id, " is not built here: its README's options are not compared");
      continue;
    }
    std::set<std::string> declared;
    for (const auto& spec : catalog.load(id).factory->options()) declared.insert(spec.name);
    std::set<std::string> documented;
    std::vector<std::string> duplicates;
    for (const auto& name : listed.names) {
      if (!documented.insert(name).second) duplicates.push_back(name);
    }
    std::vector<std::string> missing, extra;
    std::set_difference(declared.begin(), declared.end(), documented.begin(), documented.end(),
                        std::back_inserter(missing));
    std::set_difference(documented.begin(), documented.end(), declared.begin(), declared.end(),
                        std::back_inserter(extra));
    const std::string missing_text = "the README's Options table misses " + join(missing) +
                                     " (see `trainer plugins describe " + id + "`)";
    const std::string extra_text = "the README's Options table lists " + join(extra) +
                                   ", which the plugin does not declare";
    CHECK_MESSAGE(missing.empty(), missing_text);
    CHECK_MESSAGE(extra.empty(), extra_text);
    CHECK_MESSAGE(duplicates.empty(), (std::string("listed twice: ") + join(duplicates)));
  }
}
