// Writing a report (report.html, ab.json) so that a reader never sees half of one, and the
// folder it goes to.
// Thread safety: a free function.
#pragma once

#include <string>
#include <vector>

namespace zt::trainer {

// Writes `text` to `path.tmp-<pid>-<n>` (this write's own), then renames it to `path`: the file
// is whole whoever else writes it at the same time. Throws IoError naming the file and ending
// with `way_out` ("; ..."); the file before it stays, and no .tmp is left.
void write_report_file(const std::string& path, const std::string& text,
                       const std::string& way_out =
                           "; choose a writable folder (--out, or run.out_dir for a run's own "
                           "report)");
// Creates the folder `dir` (and its parents) for a command's outputs, named by its option
// `option` ("--out"). Throws IoError naming both and the reason (a folder this user cannot
// write, a file in the way).
void make_output_folder(const std::string& dir, const std::string& option);
// Creates the folder of the file `path` that a command writes at its end (eval's result,
// sample's texts), before its work: one that cannot be made failed only after it, its result
// lost. `named_by` says where the path came from ("--out x.json"). Throws IoError naming both.
void make_folder_of(const std::string& path, const std::string& named_by);
// Refuses, before any work, a `path` to write one file at that is an existing folder: the work
// was done and lost at the final rename. Throws ConfigError naming `named_by` ("--out x").
void refuse_folder_as_file(const std::string& path, const std::string& named_by);
// Removes the files `names` (relative to `dir`) an earlier run of the same command left there,
// once this run holds the folder: one that then fails or is stopped left the earlier results
// beside its own runs, read as this run's (tune's tuned.toml, a complete config). Only where the
// first name, a file no other command writes (ab.json, tune.json), is there: a report.html alone
// may be a training run's. Returns the names it removed. Throws IoError naming a file that is
// there and cannot be removed.
std::vector<std::string> remove_previous_outputs(const std::string& dir,
                                                 const std::vector<std::string>& names);

}  // namespace zt::trainer
