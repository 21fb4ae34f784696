// `trainer plugins list` and `trainer plugins describe <id>`.
#pragma once

#include <ostream>

#include "zt/host/plugin_loader.h"

namespace zt::trainer {

// Returns the exit code: 0 when every plugin found loads, 3 otherwise (each failure listed).
int list_plugins(PluginCatalog& catalog, std::ostream& out);
// Prints the plugin's identity and every option (name, type, default, range, doc).
int describe_plugin(PluginCatalog& catalog, const std::string& id, std::ostream& out);

}  // namespace zt::trainer
