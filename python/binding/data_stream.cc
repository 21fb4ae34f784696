#include "python/binding/data_stream.h"

#include "data/run_tokenizer.h"
#include "models/model.h"
#include "python/binding/module_engine.h"
#include "settings/job_settings.h"
#include "zt/error.h"

namespace zt::python {

DataStream::DataStream(const std::string& config_path, const std::string& toml_text,
                       const std::vector<std::string>& overrides, bool validation) {
  const PythonJob loaded = load_python_job(config_path, toml_text, overrides, "zt.data");
  const trainer::JobSettings& job = loaded.settings;
  const models::ModelShape shape = models::resolve_model_shape(job.model, loaded.config.catalog());
  const ModelInputs inputs = models::model_inputs(shape);
  if (validation && job.data.kind != "synthetic" && !job.eval.has_data) {
    // As trainer eval says it: a file's training windows are no validation samples.
    throw ConfigError("zt.data(validation=True) needs validation data, and data.kind = \"" +
                      job.data.kind + "\" (" + job.data.kind_where +
                      ") names none: set data.val_path (a second file of the same kind) or "
                      "data.val_fraction (the held-out share of data.path)");
  }
  source_ = validation ? data::make_val_data(job.data, inputs, shape.kind, job.eval.micro_batch)
                       : data::make_data(job.data, inputs, shape.kind);
  data_ = job.data;
}

std::shared_ptr<const data::BpeTokenizer> DataStream::tokenizer() const {
  std::call_once(tokenizer_loaded_, [this] { tokenizer_ = data::run_tokenizer(data_); });
  return tokenizer_;
}

std::pair<at::Tensor, at::Tensor> DataStream::get(int64_t step_start, int micro, int rank,
                                                  int world) const {
  // The script's arguments, checked here with a way out: the data source's own refusal is for
  // zt's callers, and would call a script's slip an internal error. Validation data has one
  // micro step (grad_accum 1), training data data.grad_accum.
  if (!source_->holds_slice(step_start, micro, rank, world)) {
    throw ConfigError("zt.Data.get(step_start=" + std::to_string(step_start) +
                      ", micro=" + std::to_string(micro) + ", rank=" + std::to_string(rank) +
                      ", world=" + std::to_string(world) +
                      "): step_start >= 0, 0 <= rank < world and 0 <= micro < " +
                      std::to_string(source_->grad_accum()) +
                      " (data.grad_accum; 1 for validation data)");
  }
  data::Batch b = source_->get(step_start, micro, rank, world);
  return {b.input, b.target};
}

std::pair<at::Tensor, at::Tensor> DataStream::samples(int64_t first, int64_t count) const {
  if (first < 0 || count < 0) {
    throw ConfigError("zt.Data.samples(first=" + std::to_string(first) +
                      ", count=" + std::to_string(count) + "): both must be >= 0");
  }
  data::Batch b = source_->get_samples(first, count);
  return {b.input, b.target};
}

}  // namespace zt::python
