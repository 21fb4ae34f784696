// The trainer's own sections of a config ([model], [data], [checkpoint], [ab], and the
// learning-rate keys of [run]) with the rules across them, declared here, beside the code that
// reads them: the core knows only its own (zt/host/config.h, add_config_sections). Every load of a
// trainer config goes through load_config_file() / load_config_string(), which declare them
// first.
// Thread safety: any thread; the first call declares them for the whole process.
#pragma once

#include <string>
#include <vector>

#include "zt/host/config.h"

namespace zt::trainer {

// Adds the trainer's sections and rules to the process's config schema, once. Never throws
// after the first call.
void declare_trainer_config();

// Config::load_file / load_string with the trainer's sections declared; same contract.
Config load_config_file(const std::string& path, const std::vector<std::string>& overrides = {},
                        const std::vector<ConfigSetting>& base = {});
Config load_config_string(const std::string& toml_text, const std::string& source_name,
                          const std::vector<std::string>& overrides = {},
                          const std::vector<ConfigSetting>& base = {});

}  // namespace zt::trainer
