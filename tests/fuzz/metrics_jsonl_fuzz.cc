// Fuzz target: a run's metrics.jsonl as `trainer report` and `trainer ab --compare` read it
// (read_run_metrics), and the report page built from it (run_report_html). Either a run and a
// page or a ConfigError naming the file.
#include "fuzz_support.h"
#include "report/run_metrics.h"
#include "report/run_report.h"
#include "zt/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::input_file("run/metrics.jsonl", data, size);
  try {
    (void)zt::trainer::read_run_metrics(path);
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  try {
    (void)zt::trainer::run_report_html(zt::fuzz::scratch().path() + "/run");
  } catch (const zt::Error& e) {
    zt::fuzz::refused(e);
  }
  return 0;
}
