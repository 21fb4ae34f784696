#include "app/prepare_data_command.h"

#include <unistd.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace zt::trainer {

namespace {

std::string megabytes(int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / 1e6 << " MB";
  return s.str();
}

// A bar redrawn in place on a terminal (at most twice a second); on a pipe or file, a line per
// tenth of the work, so logs stay short.
class ProgressBar {
 public:
  ProgressBar() : tty_(::isatty(STDERR_FILENO) == 1) {}
  ~ProgressBar() {
    if (tty_ && drawn_) std::fputs("\n", stderr);
  }

  void operator()(const data::PrepareProgress& p) {
    const double share = p.bytes > 0 ? static_cast<double>(p.bytes_done) / p.bytes : 1;
    if (tty_ ? p.seconds - last_s_ < 0.5 && p.units_done < p.units : share < next_share_) return;
    last_s_ = p.seconds;
    next_share_ = share + 0.1;
    // The units an interrupted run wrote are not this run's speed.
    const double rate = p.seconds > 0 ? (p.bytes_done - p.bytes_resumed) / 1e6 / p.seconds : 0;
    std::ostringstream line;
    line << "prepare-data: " << std::setw(3) << static_cast<int>(share * 100) << "% ["
         << std::string(static_cast<size_t>(share * 30), '#')
         << std::string(30 - static_cast<size_t>(share * 30), ' ') << "] "
         << megabytes(p.bytes_done) << " of " << megabytes(p.bytes) << ", " << p.documents
         << " documents, " << p.tokens << " tokens, " << std::fixed << std::setprecision(1) << rate
         << " MB/s";
    if (rate > 0 && p.units_done < p.units) {
      line << ", " << static_cast<int64_t>((p.bytes - p.bytes_done) / 1e6 / rate) << " s left";
    }
    std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", line.str().c_str());
    drawn_ = true;
  }

 private:
  bool tty_;
  bool drawn_ = false;
  double last_s_ = -1;
  double next_share_ = 0;
};

}  // namespace

int run_prepare_data(const CliArgs& args, std::ostream& out) {
  data::PrepareSummary s;
  {
    ProgressBar bar;
    s = data::prepare_data(args.prepare, [&](const data::PrepareProgress& p) { bar(p); });
  }
  const data::PrepareProgress& p = s.progress;
  out << "prepare-data: " << p.documents << " documents, " << megabytes(s.text_bytes)
      << " of text -> " << p.tokens << " tokens (" << std::fixed << std::setprecision(2)
      << (p.tokens > 0 ? static_cast<double>(s.text_bytes) / p.tokens : 0) << " bytes/token, "
      << s.tokenizer << ", " << s.dtype << ")\n";
  out << "  " << s.tokens_path << " and " << s.index_path;
  if (s.threads > 0) {
    out << "; " << s.threads << (s.threads == 1 ? " thread, " : " threads, ")
        << std::setprecision(1) << p.seconds << " s";
  }
  out << "\n";
  if (s.repaired_documents > 0) {
    // Text in another encoding (Latin-1, cp1252, GBK) reads so: every accented letter lost,
    // while the job would train on without a word.
    std::cerr << "zt: warning: prepare-data: " << s.repaired_documents << " of " << p.documents
              << " documents hold bytes that are not UTF-8, each ill-formed sequence read as "
                 "U+FFFD (the first in '"
              << s.first_repaired
              << "'); if the inputs are in another encoding, convert them first (iconv -f "
                 "cp1252 -t UTF-8 FILE) and prepare again\n";
  }
  if (p.resumed_units > 0) {
    out << "  resumed: an interrupted run had written " << p.resumed_units << " of " << p.units
        << " units\n";
  }
  return 0;
}

}  // namespace zt::trainer
