#include "python/binding/data_stream.h"

#include "data/run_tokenizer.h"
#include "models/model.h"
#include "python/binding/module_engine.h"
#include "settings/job_settings.h"

namespace zt::python {

DataStream::DataStream(const std::string& config_path, const std::string& toml_text,
                       const std::vector<std::string>& overrides, bool validation) {
  const PythonJob loaded = load_python_job(config_path, toml_text, overrides, "zt.data");
  const trainer::JobSettings& job = loaded.settings;
  const models::ModelShape shape = models::resolve_model_shape(job.model, loaded.config.catalog());
  const ModelInputs inputs = models::model_inputs(shape);
  source_ = validation ? data::make_val_data(job.data, inputs, shape.kind, job.eval.micro_batch)
                       : data::make_data(job.data, inputs, shape.kind);
  tokenizer_ = data::run_tokenizer(job.data);
}

std::pair<at::Tensor, at::Tensor> DataStream::get(int64_t step_start, int micro, int rank,
                                                  int world) const {
  data::Batch b = source_->get(step_start, micro, rank, world);
  return {b.input, b.target};
}

std::pair<at::Tensor, at::Tensor> DataStream::samples(int64_t first, int64_t count) const {
  data::Batch b = source_->get_samples(first, count);
  return {b.input, b.target};
}

}  // namespace zt::python
