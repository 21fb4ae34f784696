#include "data/run_tokenizer.h"

#include <sys/stat.h>

#include <sstream>

#include "data/token_index.h"
#include "data/tokenizer_files.h"
#include "zt/error.h"

namespace zt::data {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The token files whose index names the tokenizer: data.path or data.paths, and data.val_path.
std::vector<std::string> token_files(const trainer::DataSettings& data) {
  std::vector<std::string> files = data.paths;
  if (!data.path.empty()) files.push_back(data.path);
  if (!data.val_path.empty()) files.push_back(data.val_path);
  return files;
}

}  // namespace

std::vector<std::pair<std::string, TokenIndex>> prepared_indexes(
    const trainer::DataSettings& data) {
  std::vector<std::pair<std::string, TokenIndex>> out;
  if (data.kind != "tokens") return out;
  for (const std::string& file : token_files(data)) {
    const std::string index_path = index_path_for(file);
    if (!exists(index_path)) continue;
    out.emplace_back(file, read_token_index(index_path, /*with_starts=*/false));
    const TokenIndex& first = out.front().second;
    const TokenIndex& now = out.back().second;
    if (now.tokenizer != first.tokenizer || now.fingerprint != first.fingerprint) {
      throw ConfigError(file + " was made with tokenizer '" + now.tokenizer + "' (fingerprint " +
                        now.fingerprint + "), but " + out.front().first + " with '" +
                        first.tokenizer + "' (" + first.fingerprint +
                        "): one job's files must share a tokenizer; prepare them again with one");
    }
  }
  return out;
}

std::shared_ptr<const BpeTokenizer> run_tokenizer(const trainer::DataSettings& data) {
  if (data.kind != "tokens") return nullptr;
  const auto indexes = prepared_indexes(data);
  const TokenIndex* made = indexes.empty() ? nullptr : &indexes.front().second;
  // data.tokenizer, else what prepare-data was given (a name, or a rank file's path).
  const std::string name = !data.tokenizer.empty() ? data.tokenizer
                           : made                  ? made->tokenizer_source
                                                   : "";
  if (name.empty()) return nullptr;
  std::shared_ptr<const BpeTokenizer> tokenizer;
  try {
    tokenizer = load_tokenizer(name, data.tokenizer_dir);
  } catch (const ConfigError& e) {
    if (!data.tokenizer.empty()) {
      throw ConfigError("data.tokenizer = \"" + data.tokenizer + "\" (" + data.tokenizer_where +
                        "): " + e.what());
    }
    throw ConfigError(std::string(e.what()) + " (named by " +
                      index_path_for(indexes.front().first) +
                      ", which prepare-data wrote); set data.tokenizer to the tokenizer it was "
                      "made with");
  }
  std::ostringstream hex;
  hex << std::hex << tokenizer->fingerprint();
  if (made && (hex.str() != made->fingerprint || tokenizer->name() != made->tokenizer)) {
    throw ConfigError("tokenizer '" + name + "' read from " + tokenizer->source() +
                      " is not the one " + index_path_for(indexes.front().first) +
                      " was made with ('" + made->tokenizer + "', fingerprint " +
                      made->fingerprint + "; these files give '" + tokenizer->name() + "', " +
                      hex.str() +
                      "): install the same files (scripts/setup.sh pins them) or "
                      "prepare the data again");
  }
  return tokenizer;
}

double text_bytes_per_token(const trainer::DataSettings& data) {
  if (data.kind == "text") return 1;
  if (data.kind != "tokens") return 0;
  std::vector<std::string> files =
      !data.val_path.empty()
          ? std::vector<std::string>{data.val_path}
          : (!data.paths.empty() ? data.paths : std::vector<std::string>{data.path});
  std::vector<double> ratios, tokens;
  for (const std::string& file : files) {
    const std::string index_path = index_path_for(file);
    if (!exists(index_path)) return 0;
    const TokenIndex index = read_token_index(index_path, /*with_starts=*/false);
    if (index.tokens == 0) return 0;
    ratios.push_back(static_cast<double>(index.text_bytes) / static_cast<double>(index.tokens));
    tokens.push_back(static_cast<double>(index.tokens));
  }
  // The blend's shares: data.weights, else (as the blend draws) in proportion to the tokens.
  const std::vector<double>& w = data.val_path.empty() && !data.weights.empty() ? data.weights
                                                                                : tokens;
  double sum = 0, weighted = 0;
  for (size_t i = 0; i < ratios.size(); ++i) {
    sum += w[i];
    weighted += w[i] * ratios[i];
  }
  return sum > 0 ? weighted / sum : 0;
}

}  // namespace zt::data
