// Writing a report (report.html, ab.json) so that a reader never sees half of one.
// Thread safety: a free function.
#pragma once

#include <string>

namespace zt::trainer {

// Writes `text` to `path.tmp`, then renames it to `path`. Throws IoError naming the file.
void write_report_file(const std::string& path, const std::string& text);

}  // namespace zt::trainer
