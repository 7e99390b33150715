// Evaluation: the mean loss of a model over a dataset's samples, shared out over data-parallel
// ranks (each sample scored once), through one model or any pass (a pipeline's).
#pragma once
#include <functional>

#include "comm/process_group.hpp"
#include "data/dataset.hpp"
#include <string>
#include <vector>

#include "nn/model_kind.hpp"

namespace dtrain {

struct EvalResult {
  double loss = 0.0;     // mean loss per row (a language model: per token)
  int64_t rows = 0;      // rows of the loss scored (tokens; a classifier's samples)
  double metric = 0.0;   // the metric's count over them (a classifier's right predictions)
  // A mix's validation: each source's result (the fields above are over all of them).
  struct Part {
    std::string name;
    double loss = 0.0;
    int64_t rows = 0;
    double metric = 0.0;
  };
  std::vector<Part> parts;
};

// What the model declares evaluation reports besides the loss: its name ("perplexity",
// "accuracy"), its value (exp of the loss; the share of rows predicted right) and that value as
// printed ("123.45", "98.20%").
std::string metric_name(Metric m);
double metric_value(Metric m, const EvalResult& r);
std::string metric_text(Metric m, const EvalResult& r);

// Mean loss of `model` over a dataset's first max_samples samples (0 = all; no dropout), in
// batches of batch_size per rank, shared out over the group's ranks (each sample scored once).
// hooks (FSDP's) run around every unit; then every rank of the group runs the same number of passes.
EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size, int64_t max_samples,
                    Precision precision, ProcessGroup* group = nullptr, UnitHooks* hooks = nullptr);
// The same with any pass: loss_of(batch, ctx) is a batch's summed loss and metric count (a
// pipeline's, through every stage); lockstep: every rank of the group must run the same passes.
using PassLoss = std::function<EvalSums(const BatchView& batch, const StepContext& ctx)>;
EvalResult evaluate(const PassLoss& loss_of, bool lockstep, const Dataset& data, int64_t batch_size,
                    int64_t max_samples, Precision precision, ProcessGroup* group = nullptr);

}  // namespace dtrain
