#include "app/plugins_command.h"

#include <iomanip>

#include "zt/error.h"

namespace zt::trainer {

int list_plugins(PluginCatalog& catalog, std::ostream& out) {
  out << "plugin search path:\n";
  for (const auto& d : catalog.search_dirs()) {
    const std::string why = catalog.unsearched_reason(d);
    out << "  " << d << (why.empty() ? "" : " (" + why + ")") << "\n";
  }
  auto entries = catalog.load_all();
  if (entries.empty()) {
    out << "no plugins found (files named libzt_<id>.so)\n";
    return 0;
  }
  int failures = 0;
  out << "\n"
      << std::left << std::setw(22) << "id" << std::setw(11) << "kind" << std::setw(9) << "version"
      << "summary\n";
  for (const auto& e : entries) {
    if (e.record) {
      out << std::setw(22) << e.id << std::setw(11) << plugin_kind_name(e.record->kind)
          << std::setw(9) << e.record->version << e.record->summary << "\n"
          << std::setw(42) << "" << e.path << "\n";
    } else {
      ++failures;
      out << std::setw(22) << e.id << "BROKEN     " << e.error << "\n";
    }
  }
  return failures == 0 ? 0 : static_cast<int>(ErrorKind::kPlugin);
}

int describe_plugin(PluginCatalog& catalog, const std::string& id, std::ostream& out) {
  const PluginRecord& rec = catalog.load(id);
  out << rec.id << " " << rec.version << " (" << plugin_kind_name(rec.kind) << " plugin)\n"
      << "  " << rec.summary << "\n"
      << "  file: " << rec.path << "\n"
      << "  build: " << rec.fingerprint << "\n\n";
  // A codec's options go in the table of the role it serves; [plugin.<id>] is refused for it.
  if (rec.kind == ZT_KIND_CODEC) {
    out << "options, in [codec.weights] (plugins.codec_weights) or [codec.gradients] "
           "(plugins.codec_gradients), as it serves:\n";
  } else {
    out << "options, in [plugin." << rec.id << "]:\n";
  }
  auto specs = rec.factory->options();
  if (specs.empty()) out << "  (none)\n";
  for (const auto& s : specs) {
    out << "  " << s.name << " (" << value_type_name(s.type) << ", default "
        << value_to_toml(s.default_value);
    if (s.min && s.max) out << ", " << *s.min << ".." << *s.max;
    else if (s.min) out << ", >= " << *s.min;
    else if (s.max) out << ", <= " << *s.max;
    if (!s.choices.empty()) {
      out << ", one of";
      for (const auto& c : s.choices) out << " \"" << c << "\"";
    }
    out << ")\n      " << s.doc << "\n";
  }
  return 0;
}

}  // namespace zt::trainer
