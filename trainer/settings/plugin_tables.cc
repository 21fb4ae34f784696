#include "settings/plugin_tables.h"

#include <cctype>

#include "zt/host/plugin_loader.h"

namespace zt::trainer {

namespace {

// Written in the config file: a place with a line. Not a DeepSpeed config's mapping (no line),
// and not --set, which scripts give for a plugin whether or not the job selects it
// (plugin.offload_nvme.path=/scratch/..., so that any tier files land there).
bool in_file(const SourceLocation& at) { return at.line > 0 && !at.from_override(); }

// Whether `text` holds `id` as a whole name (not inside a longer one: shard_bucket2).
bool names(const std::string& text, const std::string& id) {
  const auto part_of_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  };
  for (size_t at = text.find(id); at != std::string::npos; at = text.find(id, at + 1)) {
    const size_t end = at + id.size();
    if ((at == 0 || !part_of_name(text[at - 1])) &&
        (end == text.size() || !part_of_name(text[end])))
      return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> unused_plugin_tables(const Config& config) {
  const Options& plugins = config.section("plugins");
  const std::vector<std::string>& arms = config.section("ab").get_string_list("arms");
  std::vector<std::string> lines;
  for (const Options& table : config.plugin_tables()) {
    const std::string id = table.table().substr(std::string("plugin.").size());
    // The first key the file set: where the table is.
    SourceLocation first;
    for (const OptionSpec& spec : table.specs()) {
      if (!table.is_set(spec.name) || !in_file(table.where(spec.name))) continue;
      const SourceLocation at = table.where(spec.name);
      if (first.file.empty() || (at.file == first.file && at.line < first.line)) first = at;
    }
    if (first.file.empty()) continue;
    const ZtPluginKind kind = config.catalog().load(id).kind;
    std::vector<std::string> roles;  // the [plugins] keys that take a plugin of its kind
    bool selected = false, chosen_by_set = false;
    for (const PluginRole& role : plugin_roles()) {
      if (role.kind != kind) continue;
      roles.push_back(role.key);
      selected = selected || plugins.get_string(role.key) == id;
      chosen_by_set = chosen_by_set ||
                      (plugins.is_set(role.key) && plugins.where(role.key).from_override());
    }
    bool armed = false;
    for (const std::string& arm : arms) armed = armed || names(arm, id);
    if (selected || armed || chosen_by_set) continue;
    std::string picks;
    for (size_t i = 0; i < roles.size(); ++i) {
      picks += std::string(i == 0                  ? ""
                           : i + 1 == roles.size() ? " or "
                                                   : ", ") +
               "plugins." + roles[i];
      const std::string& now = plugins.get_string(roles[i]);
      picks += now.empty() ? " (none now)" : " (now \"" + now + "\")";
    }
    const std::string kind_name = plugin_kind_name(kind);
    const std::string article = std::string("aeiou").find(kind_name[0]) != std::string::npos ? "an "
                                                                                             : "a ";
    lines.push_back(first.str() + ": [plugin." + id + "] configures " + id + " (" + article +
                    kind_name + " plugin), which no role of [plugins] selects, so " +
                    "its options are unused: select it with " + picks + ", or remove the table");
  }
  return lines;
}

}  // namespace zt::trainer
