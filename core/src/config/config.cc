#include "zt/host/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#define TOML_EXCEPTIONS 1
#include "config/toml_parser.h"

#include "zt/error.h"
#include "zt/host/did_you_mean.h"
#include "zt/host/plugin_loader.h"
#include "zt/host/utf8.h"

namespace zt {

namespace {

struct RawEntry {
  Value value;
  SourceLocation where;      // of the value: for type and range errors
  SourceLocation key_where;  // of the key: for unknown-key errors
  // Its line ends as Config::to_toml marks a default ("  # default"): read back (a checkpoint's
  // config for eval and sample, a live A/B arm), such a key stays unset while it keeps the
  // default's value, as in the run that printed it; data.token_dtype, set, overrode what a
  // prepared file's index says. Edited to another value, it is set like any other.
  bool printed_default = false;
  // It came from under the file (a DeepSpeed config), not from the file or --set.
  bool from_base = false;
  // A --set value read as TOML (a number, a boolean, a date...) though written unquoted: for a
  // string key it is these words (--set run.name=2024 names the run "2024").
  std::optional<std::string> bare_words = std::nullopt;
};
constexpr std::string_view kPrintedDefault = "  # default";
struct RawTable {
  SourceLocation where;  // of the [header], or of the first key
  std::map<std::string, RawEntry> entries;
};
using RawConfig = std::map<std::string, RawTable>;

// Gathers every problem so the user sees them all at once.
class Problems {
 public:
  void add(const std::string& message, ErrorKind kind = ErrorKind::kConfig) {
    if (messages_.empty()) first_kind_ = kind;
    messages_.push_back(message);
  }
  bool empty() const { return messages_.empty(); }
  [[noreturn]] void raise() const {
    std::string all;
    for (const auto& m : messages_) all += (all.empty() ? "" : "\n") + m;
    if (first_kind_ == ErrorKind::kPlugin) throw PluginError(all);
    throw ConfigError(all);
  }

 private:
  std::vector<std::string> messages_;
  ErrorKind first_kind_ = ErrorKind::kConfig;
};

SourceLocation location_of(const toml::node& node, const std::string& file) {
  const auto& src = node.source();
  return {file, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
}

// Converts a TOML node to a Value; returns false (and reports) for unsupported node types.
bool to_value(const toml::node& node, Value& out, const std::string& what,
              const SourceLocation& where, Problems& problems) {
  if (auto v = node.as_boolean()) {
    out = v->get();
    return true;
  }
  if (auto v = node.as_integer()) {
    out = static_cast<int64_t>(v->get());
    return true;
  }
  if (auto v = node.as_floating_point()) {
    out = v->get();
    return true;
  }
  if (auto v = node.as_string()) {
    out = v->get();
    return true;
  }
  if (auto arr = node.as_array()) {
    std::vector<double> numbers;
    std::vector<std::string> strings;
    for (const auto& e : *arr) {
      if (auto i = e.as_integer()) numbers.push_back(static_cast<double>(i->get()));
      else if (auto f = e.as_floating_point()) numbers.push_back(f->get());
      else if (auto s = e.as_string()) strings.push_back(s->get());
      else {
        problems.add(where.str() + ": " + what + ": arrays may hold numbers or strings only");
        return false;
      }
    }
    if (!numbers.empty() && !strings.empty()) {
      problems.add(where.str() + ": " + what + ": an array must not mix numbers and strings");
      return false;
    }
    if (!numbers.empty()) out = numbers;
    else out = strings;
    return true;
  }
  problems.add(where.str() + ": " + what +
               ": unsupported value type (dates and inline tables are not zt options)");
  return false;
}

// The text's lines, for the markers Config::to_toml leaves at their ends.
using Lines = std::vector<std::string_view>;

Lines lines_of(std::string_view text) {
  Lines lines;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    at = end + 1;
  }
  return lines;
}

bool marked_default(const Lines& lines, int line) {
  if (line <= 0 || static_cast<size_t>(line) > lines.size()) return false;
  const std::string_view text = lines[static_cast<size_t>(line) - 1];
  return text.size() >= kPrintedDefault.size() &&
         text.substr(text.size() - kPrintedDefault.size()) == kPrintedDefault;
}

void read_table(const toml::table& table, const std::string& name, const std::string& file,
                const Lines& lines, RawConfig& raw, Problems& problems) {
  RawTable& out = raw[name];
  out.where = location_of(table, file);
  for (const auto& [key, node] : table) {
    std::string k(key.str());
    SourceLocation where = location_of(node, file);
    if (node.is_table()) {
      problems.add(where.str() + ": [" + name + "." + k + "] is not a zt section; [" + name +
                   "] takes plain keys");
      continue;
    }
    Value value;
    SourceLocation key_where{file, static_cast<int>(key.source().begin.line),
                             static_cast<int>(key.source().begin.column)};
    if (key_where.line == 0) key_where = where;
    if (to_value(node, value, name + "." + k, where, problems)) {
      out.entries[k] = {value, where, key_where, marked_default(lines, key_where.line)};
    }
  }
}

toml::table parse_document(const std::string& text, const std::string& file) {
  try {
    return toml::parse(std::string_view(text), std::string_view(file));
  } catch (const toml::parse_error& e) {
    // A DeepSpeed user's first try is `--config ds_config.json`: "fix the syntax" sent them to
    // edit valid JSON.
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
      throw ConfigError(file +
                        ":1: this is JSON, not a zt TOML config: a DeepSpeed config is "
                        "given beside one, as --deepspeed " +
                        file + " --config configs/zero3.toml (or run.deepspeed in the TOML)");
    }
    const auto& src = e.source();
    throw ConfigError(
        file + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column) +
        ": malformed TOML: " + std::string(e.description()) + "; fix the syntax at that place");
  }
}

// "[run], [launch], ...": the schema's sections, the trainer's included, for hints.
std::string bracketed_section_names() {
  std::string out;
  for (const auto& s : config_schema()) out += (out.empty() ? "[" : ", [") + s.name + "]";
  return out;
}

RawConfig parse_toml(const std::string& text, const std::string& file, Problems& problems) {
  toml::table root = parse_document(text, file);
  const Lines lines = lines_of(text);
  RawConfig raw;
  for (const auto& [key, node] : root) {
    std::string k(key.str());
    SourceLocation where{file, static_cast<int>(key.source().begin.line),
                         static_cast<int>(key.source().begin.column)};
    if (where.line == 0) where = location_of(node, file);
    const toml::table* table = node.as_table();
    if (!table) {
      problems.add(where.str() + ": key '" + k + "' is outside any section; put it under one " +
                   "of " + bracketed_section_names());
      continue;
    }
    if (k == "plugin" || k == "codec") {  // [plugin.<id>], [codec.<role>]
      for (const auto& [id, sub] : *table) {
        const std::string name = k + "." + std::string(id.str());
        if (const toml::table* t = sub.as_table()) {
          read_table(*t, name, file, lines, raw, problems);
        } else {
          problems.add(location_of(sub, file).str() + ": " + name + " must be a table: [" + name +
                       "]");
        }
      }
      continue;
    }
    read_table(*table, k, file, lines, raw, problems);
  }
  return raw;
}

// Keys that are another name of a key in the same table (the schema's "another name for"). An
// override of either name replaces what the file says under the other (--set wins over the file,
// and a printed config, which holds the pair once, reads back under either); a printed config
// holds the pair under the key's own name, with whichever value was given (a rule refuses the two
// set apart).
struct Alias {
  const char* table;
  const char* alias;
  const char* key;
};
constexpr Alias kAliases[] = {{"zero", "shard_group_size", "mics_shard_size"}};

// The other name of `key`, if it has one, gives way to an override of `key`, unless another
// override set it (the file's value, or a base's such as a DeepSpeed config's, does).
void override_other_name(const std::string& table, const std::string& key, RawTable& t) {
  for (const Alias& a : kAliases) {
    if (table != a.table || (key != a.alias && key != a.key)) continue;
    auto other = t.entries.find(key == a.alias ? a.key : a.alias);
    if (other != t.entries.end() && !other->second.where.from_override()) t.entries.erase(other);
  }
}

// A printed config's "# default" line that still holds the default; edited to another value it
// is set like any other. A key whose spec this cannot see yet (a plugin's) counts as the default.
bool holds_printed_default(const std::string& table, const std::string& key, const RawEntry& e) {
  if (!e.printed_default) return false;
  const OptionSpec* spec = config_option(table, key);
  if (!spec) return true;
  try {
    return check_option(*spec, e.value, table, e.where) == spec->default_value;
  } catch (const ConfigError&) {
    return false;  // its own check reports it
  }
}

// Whether the file sets `key` of `table`, under either of its names. A key a printed config
// marks as its default is not set: the value under it (a DeepSpeed config's) wins, as it would
// have in the run that printed it.
bool file_sets(const std::string& table, const std::string& key, const RawTable& t) {
  const auto set = [&](const std::string& k) {
    auto it = t.entries.find(k);
    return it != t.entries.end() && !holds_printed_default(table, k, it->second);
  };
  if (set(key)) return true;
  for (const Alias& a : kAliases) {
    if (table == a.table && (key == a.alias || key == a.key) &&
        set(key == a.alias ? a.key : a.alias))
      return true;
  }
  return false;
}

// A value under the file replaces the printed default of the other name too.
void give_way_other_name(const std::string& table, const std::string& key, RawTable& t) {
  for (const Alias& a : kAliases) {
    if (table != a.table || (key != a.alias && key != a.key)) continue;
    t.entries.erase(key == a.alias ? a.key : a.alias);
  }
}

void apply_override(const std::string& text, RawConfig& raw, Problems& problems) {
  SourceLocation where{"--set " + text, 0, 0};
  size_t eq = text.find('=');
  std::string path = text.substr(0, eq);
  size_t dot = path.rfind('.');
  if (eq == std::string::npos || dot == std::string::npos || dot == 0 || dot + 1 == path.size()) {
    problems.add(where.str() + ": expected section.key=value, e.g. --set zero.stage=2");
    return;
  }
  std::string table = path.substr(0, dot), key = path.substr(dot + 1);
  std::string value_text = text.substr(eq + 1);
  Value value = value_text;  // bare words are strings: --set plugins.shard=shard_tensor
  try {
    toml::table parsed = toml::parse(std::string_view("v = " + value_text),
                                     std::string_view("--set"));
    Problems local;
    Value v;
    if (to_value(*parsed.get("v"), v, path, where, local)) value = v;
  } catch (const toml::parse_error&) {
  }
  // A file's TOML is UTF-8 (the parser refuses other bytes); a --set value's bare words are the
  // shell's bytes: a path in another encoding trained, and then failed every checkpoint's JSON.
  if (const auto* words = std::get_if<std::string>(&value); words && !is_valid_utf8(*words)) {
    problems.add("--set " + replace_invalid_utf8(text) + ": the value is not UTF-8 text (a " +
                 "file name in another encoding?); config values are UTF-8: rename the file, " +
                 "or link it under a UTF-8 name");
    return;
  }
  RawTable& t = raw[table];
  if (t.where.file.empty()) t.where = where;
  RawEntry entry{value, where, where};
  if (!std::holds_alternative<std::string>(value)) entry.bare_words = value_text;
  t.entries[key] = std::move(entry);
  override_other_name(table, key, t);
}

std::vector<std::string> spec_names(const std::vector<OptionSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  return names;
}

// Validates one raw table against its specs; returns the typed Options.
Options validate_table(const std::string& name, const std::vector<OptionSpec>& specs,
                       const RawTable* raw, const std::string& owner, Problems& problems) {
  std::map<std::string, Value> values;
  std::map<std::string, SourceLocation> where;
  if (raw) {
    for (const auto& [key, entry] : raw->entries) {
      const OptionSpec* spec = nullptr;
      for (const auto& s : specs)
        if (s.name == key) spec = &s;
      if (!spec) {
        problems.add(entry.key_where.str() + ": unknown key '" + key + "' in [" + name + "]" +
                     did_you_mean(key, spec_names(specs)) + "; keys of [" + name + "]" + owner +
                     ": see `trainer --print-config`" +
                     (name.rfind("plugin.", 0) == 0
                          ? " or `trainer plugins describe " + name.substr(7) + "`"
                          : "") +
                     ".");
        continue;
      }
      try {
        const bool as_words = spec->type == ValueType::kString && entry.bare_words &&
                              !entry.bare_words->empty() && entry.bare_words->front() != '[' &&
                              entry.bare_words->front() != '{';
        Value value = check_option(*spec, as_words ? Value(*entry.bare_words) : entry.value, name,
                                   entry.where);
        if (entry.printed_default && value == spec->default_value) continue;
        values[key] = std::move(value);
        where[key] = entry.where;
      } catch (const ConfigError& e) {
        problems.add(e.what());
      }
    }
  }
  return Options(name, specs, values, where);
}

std::vector<std::string> section_names() {
  std::vector<std::string> names;
  for (const auto& s : config_schema()) names.push_back(s.name);
  return names;
}

void check_combinations(const Config& config, Problems& problems) {
  std::vector<std::string> broken;
  for (const ConfigRule& rule : config_rules()) rule.check(config, broken);
  for (const std::string& message : broken) problems.add(message);
}

}  // namespace

std::string Config::read_file(const std::string& path) {
  // A folder opens as a stream that reads nothing: it was an empty config, the defaults' job.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError("'" + path +
                      "' is a folder, not a config file; pass a .toml file to "
                      "--config (e.g. configs/zero3.toml)");
  }
  std::ifstream in(path);
  if (!in) {
    throw ConfigError("cannot read config file '" + path +
                      "': no such file or not readable; pass an existing file to --config "
                      "(see configs/)");
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Config Config::load_file(const std::string& path, const std::vector<std::string>& overrides,
                         const std::vector<ConfigSetting>& base) {
  return load_string(read_file(path), path, overrides, base);
}

std::optional<Value> Config::peek_file(const std::string& path,
                                       const std::vector<std::string>& overrides,
                                       const std::string& section, const std::string& key) {
  return peek_string(read_file(path), path, overrides, section, key);
}

std::optional<Value> Config::peek_string(const std::string& toml_text,
                                         const std::string& source_name,
                                         const std::vector<std::string>& overrides,
                                         const std::string& section, const std::string& key) {
  Problems problems;
  RawConfig raw = parse_toml(toml_text, source_name, problems);
  const std::string prefix = section + "." + key + "=";
  for (const auto& o : overrides) {
    if (o.compare(0, prefix.size(), prefix) == 0) apply_override(o, raw, problems);
  }
  auto table = raw.find(section);
  if (table == raw.end()) return std::nullopt;
  auto entry = table->second.entries.find(key);
  if (entry == table->second.entries.end()) return std::nullopt;
  return entry->second.value;
}

std::vector<std::string> Config::plugin_dirs_of_file(const std::string& path,
                                                     const std::vector<std::string>& overrides) {
  return plugin_dirs_of_string(read_file(path), path, overrides);
}

std::vector<std::string> Config::plugin_dirs_of_string(const std::string& toml_text,
                                                       const std::string& source_name,
                                                       const std::vector<std::string>& overrides) {
  Problems problems;
  RawConfig raw;
  toml::table root = parse_document(toml_text, source_name);
  if (const toml::table* plugins = root["plugins"].as_table()) {
    if (const toml::node* node = plugins->get("dirs")) {
      SourceLocation where = location_of(*node, source_name);
      Value value;
      if (to_value(*node, value, "plugins.dirs", where, problems)) {
        raw["plugins"].entries["dirs"] = {value, where, where};
      }
    }
  }
  const std::string key = "plugins.dirs=";
  for (const auto& o : overrides) {
    if (o.compare(0, key.size(), key) == 0) apply_override(o, raw, problems);
  }
  if (!problems.empty()) problems.raise();
  auto entry = raw["plugins"].entries.find("dirs");
  if (entry == raw["plugins"].entries.end()) return {};
  for (const auto& section : config_schema()) {
    if (section.name != "plugins") continue;
    for (const auto& spec : section.keys) {
      if (spec.name != "dirs") continue;
      Value v = check_option(spec, entry->second.value, "plugins", entry->second.where);
      return std::get<std::vector<std::string>>(v);
    }
  }
  throw InternalError("config_schema() has no plugins.dirs");
}

namespace {

// The roles a codec serves: [plugins] codec_<role> picks it, [codec.<role>] holds its options.
const char* const kCodecRoles[] = {"weights", "gradients"};

void report_unknown_sections(const RawConfig& raw, Problems& problems) {
  for (const auto& [name, table] : raw) {
    bool known = name.rfind("plugin.", 0) == 0;
    for (const char* role : kCodecRoles) known = known || name == std::string("codec.") + role;
    for (const auto& s : config_schema()) known = known || s.name == name;
    if (!known) {
      problems.add(table.where.str() + ": unknown section [" + name + "]" +
                   did_you_mean(name, section_names()) + "; sections are " +
                   bracketed_section_names() +
                   ", [plugin.<id>], [codec.weights], [codec.gradients]");
    }
  }
}

// Loads every plugin [plugins] selects and every one given a [plugin.<id>] table; returns the
// ids whose tables must be validated against the options they declare.
std::set<std::string> load_plugins(const RawConfig& raw, const Options& plugins,
                                   PluginCatalog& catalog, Problems& problems) {
  std::set<std::string> tables_needed;
  for (const auto& role : plugin_roles()) {
    const std::string& id = plugins.get_string(role.key);
    if (id.empty()) continue;
    try {
      catalog.load_kind(id, role.kind, "plugins." + role.key);
      // A codec's options are its role's table (validate_codec_tables), not [plugin.<id>].
      if (role.kind != ZT_KIND_CODEC) tables_needed.insert(id);
    } catch (const Error& e) {
      problems.add(plugins.where(role.key).str() + ": " + e.what(), e.kind());
    }
  }
  for (const auto& [name, table] : raw) {
    if (name.rfind("plugin.", 0) != 0) continue;
    std::string id = name.substr(7);
    if (catalog.path_of(id).empty()) {
      problems.add(table.where.str() + ": [" + name + "] configures plugin '" + id +
                       "', which is not installed" + did_you_mean(id, catalog.ids()) +
                       "; `trainer plugins list` shows what is",
                   ErrorKind::kPlugin);
      continue;
    }
    tables_needed.insert(id);
  }
  return tables_needed;
}

// [codec.<role>] against the options of the codec plugins.codec_<role> names; a table for a
// role with no codec is refused, so options are never silently unused.
std::vector<Options> validate_codec_tables(const RawConfig& raw, const Options& plugins,
                                           PluginCatalog& catalog, Problems& problems) {
  std::vector<Options> tables;
  for (const char* role : kCodecRoles) {
    const std::string name = std::string("codec.") + role, key = std::string("codec_") + role;
    const auto it = raw.find(name);
    const std::string& id = plugins.get_string(key);
    if (id.empty()) {
      // A table only a DeepSpeed config wrote goes with the codec it chose, which the file or
      // --set turned off (plugins.codec_<role> = "").
      const bool only_base = it != raw.end() &&
                             std::all_of(it->second.entries.begin(), it->second.entries.end(),
                                         [](const auto& e) { return e.second.from_base; });
      if (it != raw.end() && !only_base) {
        problems.add(it->second.where.str() + ": [" + name + "] configures the " + role +
                     " codec, but plugins." + key + " names none; set plugins." + key +
                     " (e.g. \"codec_blockq\") or remove the table");
      }
      continue;
    }
    try {
      const PluginRecord& rec = catalog.load(id);
      if (rec.kind != ZT_KIND_CODEC) continue;  // load_plugins reported the wrong kind
      tables.push_back(validate_table(name, rec.factory->options(),
                                      it == raw.end() ? nullptr : &it->second,
                                      " (plugin " + rec.path + ")", problems));
    } catch (const Error&) {
      // load_plugins reported why the plugin does not load.
    }
  }
  return tables;
}

}  // namespace

Config Config::load_string(const std::string& toml_text, const std::string& source_name,
                           const std::vector<std::string>& overrides,
                           const std::vector<ConfigSetting>& base) {
  Problems problems;
  RawConfig raw = parse_toml(toml_text, source_name, problems);
  // Under the file: a key the file sets keeps the file's value.
  for (const ConfigSetting& b : base) {
    const size_t dot = b.key.rfind('.');
    const std::string table = b.key.substr(0, dot), key = b.key.substr(dot + 1);
    RawTable& t = raw[table];
    if (file_sets(table, key, t)) continue;
    const SourceLocation where{b.origin, 0, 0};
    if (t.where.file.empty()) t.where = where;
    t.entries[key] = {b.value, where, where, false, true};
    give_way_other_name(table, key, t);
  }
  for (const auto& o : overrides) apply_override(o, raw, problems);
  report_unknown_sections(raw, problems);

  Config config;
  config.source_ = source_name;
  for (const auto& section : config_schema()) {
    auto it = raw.find(section.name);
    config.sections_.push_back(validate_table(
        section.name, section.keys, it == raw.end() ? nullptr : &it->second, "", problems));
  }
  // Combinations read core sections only; skip them when those already have errors, so a
  // defaulted bad value does not cause a misleading second message.
  if (problems.empty()) check_combinations(config, problems);

  config.catalog_ = std::make_shared<PluginCatalog>(
      config.section("plugins").get_string_list("dirs"));
  for (const auto& id : load_plugins(raw, config.section("plugins"), *config.catalog_, problems)) {
    try {
      const PluginRecord& rec = config.catalog_->load(id);
      auto it = raw.find("plugin." + id);
      if (rec.kind == ZT_KIND_CODEC) {
        problems.add(it->second.where.str() + ": [plugin." + id + "] configures codec " + id +
                     ", whose options go in the table of the role it serves: [codec.weights] "
                     "(plugins.codec_weights) or [codec.gradients] (plugins.codec_gradients)");
        continue;
      }
      config.plugin_tables_.push_back(validate_table("plugin." + id, rec.factory->options(),
                                                     it == raw.end() ? nullptr : &it->second,
                                                     " (plugin " + rec.path + ")", problems));
    } catch (const Error& e) {
      problems.add(e.what(), e.kind());
    }
  }
  config.codec_tables_ = validate_codec_tables(raw, config.section("plugins"), *config.catalog_,
                                               problems);
  if (!problems.empty()) problems.raise();
  return config;
}

const Options& Config::codec_options(const std::string& role) const {
  for (const auto& t : codec_tables_)
    if (t.table() == "codec." + role) return t;
  throw InternalError("config has no validated table for codec role '" + role +
                      "'; plugins.codec_" + role + " names no codec");
}

const Options& Config::section(const std::string& name) const {
  for (const auto& s : sections_)
    if (s.table() == name) return s;
  throw InternalError("config has no section [" + name + "]");
}

const Options& Config::plugin_options(const std::string& id) const {
  for (const auto& p : plugin_tables_)
    if (p.table() == "plugin." + id) return p;
  throw InternalError("config has no validated table for plugin '" + id +
                      "'; it was neither selected in [plugins] nor configured");
}

std::vector<std::pair<std::string, std::string>> Config::selected_plugins() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& role : plugin_roles()) {
    const std::string& id = section("plugins").get_string(role.key);
    if (!id.empty()) out.emplace_back(role.key, id);
  }
  return out;
}

namespace {

const Alias* alias_named(const std::string& table, const std::string& name) {
  for (const Alias& a : kAliases) {
    if (table == a.table && name == a.alias) return &a;
  }
  return nullptr;
}

// The alias given in place of `name`, where it alone was.
const char* given_alias(const Options& options, const std::string& name) {
  for (const Alias& a : kAliases) {
    if (options.table() == a.table && name == a.key && options.is_set(a.alias) &&
        !options.is_set(a.key))
      return a.alias;
  }
  return nullptr;
}

}  // namespace

std::string Config::to_toml() const {
  std::ostringstream os;
  // The config file's path as the shell gave it: printed into checkpoints' JSON, so as UTF-8.
  os << "# resolved configuration of " << replace_invalid_utf8(source_) << "\n";
  auto print = [&os](const Options& options) {
    os << "\n[" << options.table() << "]\n";
    for (const auto& spec : options.specs()) {
      if (alias_named(options.table(), spec.name)) continue;
      if (const char* alias = given_alias(options, spec.name)) {
        os << spec.name << " = " << value_to_toml(options.get(alias)) << "  # given as " << alias
           << "\n";
        continue;
      }
      os << spec.name << " = " << value_to_toml(options.get(spec.name));
      if (!options.is_set(spec.name)) {
        os << "  # default";
      } else if (const SourceLocation where = options.where(spec.name);
                 where.line == 0 && !where.from_override()) {
        os << "  # from " << where.file;
      }
      os << "\n";
    }
  };
  for (const auto& s : sections_) print(s);
  for (const auto& p : plugin_tables_) print(p);
  for (const auto& c : codec_tables_) print(c);
  return os.str();
}

}  // namespace zt
