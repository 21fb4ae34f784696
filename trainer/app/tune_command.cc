#include "app/tune_command.h"

#include "app/estimate_command.h"
#include "tune/tuner.h"

namespace zt::trainer {

int run_tune(const CliArgs& args, std::ostream& out) {
  TuneRequest request;
  request.config_path = args.config_path;
  request.base = job_overrides(args);
  request.load = job_loader(args);
  request.args = args.tune;
  return run_tune(request, out);
}

}  // namespace zt::trainer
