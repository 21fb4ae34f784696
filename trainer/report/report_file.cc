#include "report/report_file.h"

#include <cstdio>
#include <fstream>

#include "zt/error.h"

namespace zt::trainer {

void write_report_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out)
      throw IoError("cannot write " + tmp +
                    "; choose a writable folder (--out, or run.out_dir for a run's own report)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw IoError("cannot rename " + tmp + " to " + path +
                  "; choose a writable folder (--out, or run.out_dir for a run's own report)");
  }
}

}  // namespace zt::trainer
