// What every zt benchmark shares: medians, JSON spelling, command-line numbers, and the main()
// wrapper that turns errors into one line and an exit code.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace zt::bench {

// The median of `values` (mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> values);

// JSON has no NaN or infinity: those become null.
std::string json_number(double v);
std::string json_string(const std::string& s);

// A positive integer given to `flag`, else ConfigError quoting `usage`.
int64_t parse_positive(const std::string& text, const std::string& flag, const char* usage);
// "a,b,c" of positive integers.
std::vector<int64_t> parse_positive_list(const std::string& list, const std::string& flag,
                                         const char* usage);

// Reads the option at args[i], given as "--flag value" or "--flag=value", into flag and value
// (advancing i past a separate value). Returns false for -h/--help. An option not in `known`
// or without a value is a ConfigError quoting `usage`.
bool next_option(const std::vector<std::string>& args, size_t& i,
                 const std::vector<std::string>& known, const char* usage, std::string& flag,
                 std::string& value);

// The BLAS behind the numbers: the OpenBLAS core this process runs, who chose it (OpenBLAS,
// zt, or OPENBLAS_CORETYPE from the environment), and the core of the ranks zt starts (zt
// sets OPENBLAS_CORETYPE for them when OpenBLAS picks a core weaker than the CPU runs).
// blas_line() for the printed header ("BLAS: OpenBLAS 0.3.21 core Prescott; the ranks zt
// starts run SkylakeX"), blas_json() for the results ("\"blas\": {...}", no trailing comma).
std::string blas_line();
std::string blas_json();

// A benchmark's results file: written into memory, then whole to `path` at commit() (a
// temporary file renamed over it, its folders created), so a run that fails or is interrupted
// before the end leaves the results before it, never half a file. commit() throws IoError
// naming the folder or the file it could not write.
class ResultsFile : public std::ostringstream {
 public:
  explicit ResultsFile(std::string path) : path_(std::move(path)) {}
  void commit();

 private:
  std::string path_;
};

// A private temporary folder ("/tmp/<prefix>.XXXXXX"), removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// For a bench that runs jobs or fills scratch folders: SIGINT (Ctrl-C), SIGTERM and SIGUSR1 are
// recorded, not fatal (a job the bench runs gets them too, or from run_logged), and the bench
// stops at its next stop_if_signalled(): after the job or command it waits for, or between its
// own rounds. The destructors on the way then remove its scratch folders and simulated hosts,
// which the signals' default action left behind (the NVMe bench's files are GBs). A second Ctrl-C
// a second or more after the first ends it at once.
void stop_on_signals();
// Throws trainer::StoppedBySignal (bench_main reports it) when such a signal came; `doing` says
// what the bench was doing ("running /path/trainer").
void stop_if_signalled(const std::string& doing);

// Runs `run(args)` as the program `name`: zt errors become "name: kind error: ..." and their
// exit code, a stop on a signal "name: stopped by SIGINT: ..." and 128 + the signal, other
// exceptions exit 1.
int bench_main(const std::string& name, int argc, char** argv,
               int (*run)(const std::vector<std::string>&));

}  // namespace zt::bench
