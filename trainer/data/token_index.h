// A prepared token file's index (`trainer prepare-data` writes it beside the tokens): which
// tokenizer made the ids, their width, and where each document starts. The tokens themselves stay
// a flat little-endian file (PREFIX.bin, what data.kind = "tokens" has always read, with
// <|endoftext|> after each document); the index is PREFIX.idx:
//   8 bytes  "ZTTOKIDX"
//   u32      format version (1)
//   u32      length of the JSON header that follows
//   JSON     {"tokenizer", "tokenizer_source", "fingerprint", "vocab", "dtype", "eot",
//             "documents", "tokens", "text_bytes", "sources"}
//   padding  to a multiple of 8 bytes
//   u64[documents + 1]  each document's first token, then the total
// Thread safety: pure functions over files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

struct TokenIndex {
  std::string tokenizer;         // encoding name ("gpt2")
  std::string tokenizer_source;  // as prepare-data was given it: the name, or a rank file's path
  std::string fingerprint;       // the tokenizer's fingerprint, 16 hex digits
  int64_t vocab = 0;             // ids are below this
  std::string dtype;             // "uint16" | "uint32"
  int64_t eot = -1;              // the id between documents
  int64_t tokens = 0;
  int64_t text_bytes = 0;            // of the documents' text, as read
  std::vector<std::string> sources;  // the inputs given to prepare-data
  int64_t documents = 0;
  std::vector<uint64_t> document_starts;  // documents + 1 entries, the last == tokens (if read)
  int64_t starts_offset = 0;              // where document_starts begins in the index file

  int element_size() const { return dtype == "uint32" ? 4 : 2; }
};

// "x.bin" -> "x.idx" (any other name gets ".idx" appended).
std::string index_path_for(const std::string& tokens_path);

// Whether `path` is a file that starts as a zt token index does (prepare-data's PREFIX.idx).
bool is_token_index(const std::string& path);

// Writes `index` to `path` (through a temporary file and a rename). IoError naming the file.
void write_token_index(const std::string& path, const TokenIndex& index);
// Reads one; ConfigError naming the file on anything malformed. Without `with_starts` only the
// header is read (document_starts stays empty): what a job's ranks check, which for a corpus of
// millions of documents must not read megabytes each.
TokenIndex read_token_index(const std::string& path, bool with_starts = true);

// The document start of `path` (an index whose header `index` is) nearest `token` among those in
// [lo, hi], the earlier on a tie; -1 where none is. A binary search that reads a few entries of
// the table, not the table (a corpus of millions of documents).
// Throws IoError when the file cannot be read, ConfigError naming it when it is cut short.
int64_t nearest_document_start(const std::string& path, const TokenIndex& index, int64_t token,
                               int64_t lo, int64_t hi);
}  // namespace zt::data
