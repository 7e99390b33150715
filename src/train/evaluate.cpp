// evaluate (see evaluate.hpp).
#include "train/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/loader.hpp"
#include "data/sampler.hpp"

namespace dtrain {

EvalResult evaluate(Model& model, const Dataset& data, int64_t batch_size, int64_t max_samples,
                    Precision precision, ProcessGroup* group, UnitHooks* hooks) {
  return evaluate(
      [&](const BatchView& batch, const StepContext& ctx) { return model.forward_eval(batch, ctx, hooks); },
      hooks != nullptr, data, batch_size, max_samples, precision, group);
}

EvalResult evaluate(const PassLoss& loss_of, bool lockstep, const Dataset& data, int64_t batch_size,
                    int64_t max_samples, Precision precision, ProcessGroup* group) {
  const int R = group ? group->size() : 1, r = group ? group->rank() : 0;
  const int64_t n = max_samples > 0 ? std::min(data.size(), max_samples) : data.size();
  DistributedSampler sampler(n, false, 0, R, r, false, /*pad=*/false);
  BatchLoader loader(data, sampler, batch_size, false);
  loader.start_epoch();
  // With hooks every rank runs the same number of passes (sharded parameters are gathered by all of
  // them): the most any rank has; a rank out of samples repeats its last batch and ignores the result.
  const int64_t passes = lockstep ? ((n + R - 1) / R + batch_size - 1) / batch_size : 0;
  Batch b;
  const SampleShape shape = data.shape();
  double sums[3] = {0.0, 0.0, 0.0};  // loss, rows, metric
  for (int64_t pass = 0;; ++pass) {
    const bool have = loader.next(b);
    if (!have && pass >= passes) break;
    StepContext ctx;
    ctx.B = std::max<int64_t>(b.samples, 1);
    ctx.T = shape.targets;  // rows of the loss per sample
    ctx.precision = precision;
    if (b.samples == 0) {  // no sample at all on this rank: score sample 0, ignored
      b.shape = shape;
      b.samples = 1;
      b.tokens.resize(shape.input == InputKind::tokens ? size_t(shape.inputs) : 0);
      b.pixels.resize(shape.input == InputKind::images ? size_t(shape.inputs) : 0);
      b.targets.resize(size_t(shape.targets));
      data.get(0, shape.input == InputKind::tokens ? static_cast<void*>(b.tokens.data()) : b.pixels.data(),
               b.targets.data());
    }
    const BatchView view = b.view();
    const EvalSums pass_sums = loss_of(view, ctx);
    if (!have) continue;
    sums[0] += pass_sums.loss;
    sums[1] += double(b.samples * shape.targets);
    sums[2] += pass_sums.metric;
  }
  if (group && R > 1) group->allreduce(sums, 3);
  return {sums[1] > 0 ? sums[0] / sums[1] : 0.0, int64_t(sums[1]), sums[2], {}};
}

std::string metric_name(Metric m) { return m == Metric::perplexity ? "perplexity" : "accuracy"; }

double metric_value(Metric m, const EvalResult& r) {
  if (m == Metric::perplexity) return std::exp(r.loss);
  return r.rows > 0 ? r.metric / double(r.rows) : 0.0;
}

std::string metric_text(Metric m, const EvalResult& r) {
  char s[32];
  if (m == Metric::perplexity)
    std::snprintf(s, sizeof s, "%.2f", metric_value(m, r));
  else
    std::snprintf(s, sizeof s, "%.2f%%", 100.0 * metric_value(m, r));
  return s;
}

}  // namespace dtrain
