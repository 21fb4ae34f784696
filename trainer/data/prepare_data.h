// `trainer prepare-data`: text in, tokens out. Reads text files, folders of them and JSONL files
// (one document per line, the text in a named field), encodes each document with a BPE tokenizer
// on all cores, and writes PREFIX.bin (the ids, little-endian uint16 or uint32 by vocabulary,
// <|endoftext|> after each document: what data.kind = "tokens" reads) and PREFIX.idx (the
// tokenizer and each document's start, data/token_index.h).
// The inputs are cut into work units of whole documents (~unit_bytes of text each), encoded in
// parallel and written in order, so the output is the same on any number of threads. After each
// unit the written tokens are synced and a journal (PREFIX.progress.json) records them: a run
// killed at any point and started again with the same arguments continues after the last
// recorded unit and writes the same bytes as a run never interrupted. The outputs take their
// final names only when complete.
// Thread safety: prepare_data() runs one preparation; it starts and joins its own threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace zt::data {

struct PrepareRequest {
  std::vector<std::string> inputs;   // files and folders (read recursively, in name order)
  std::vector<std::string> exclude;  // glob patterns of file names a folder's files skip ("*.dat")
  std::string out_prefix;            // writes out_prefix.bin and out_prefix.idx
  std::string tokenizer = "gpt2";    // data/tokenizer_files.h's names or a rank file's path
  std::string tokenizer_dir;         // '' = default_tokenizer_dir()
  std::string field = "text";        // the JSONL field that holds a document's text
  std::string separator;  // a line that splits a text file into documents ('' = a file is one)
  int threads = 0;        // 0 = every core
  int64_t unit_bytes = 8 << 20;  // text per work unit
  bool overwrite = false;        // replace an out_prefix.bin / .idx that exists
};

struct PrepareProgress {
  int64_t units_done = 0, units = 0;
  int64_t bytes_done = 0, bytes = 0;  // input bytes of the units done / of all
  int64_t documents = 0, tokens = 0;
  int64_t resumed_units = 0;  // units an interrupted run had already written
  int64_t bytes_resumed = 0;  // and their input bytes
  double seconds = 0;         // since this run started
};

struct PrepareSummary {
  PrepareProgress progress;  // at the end
  std::string tokens_path, index_path;
  std::string tokenizer, dtype;
  int64_t text_bytes = 0;  // of the documents' text (JSONL: the field's text, not the lines)
  int threads = 0;
  // Documents with bytes that are not UTF-8, each ill-formed sequence read as U+FFFD (as
  // tiktoken's decode and Python's errors="replace" do), and the input of the first of them.
  int64_t repaired_documents = 0;
  std::string first_repaired;
};

// Runs a preparation, calling `report` after every unit written (from the calling thread).
// Throws ConfigError for inputs it cannot read as asked (naming the file and line), IoError for
// outputs it cannot write.
// Whether `file` is one of the files a preparation into `out_prefix` writes (PREFIX.bin, .idx,
// their partial and temporary forms, the journal): a folder given as input never reads them.
bool is_prepare_output(const std::filesystem::path& file, const std::string& out_prefix);

PrepareSummary prepare_data(const PrepareRequest& request,
                            const std::function<void(const PrepareProgress&)>& report);

}  // namespace zt::data
