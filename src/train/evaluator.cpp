// Evaluator (see evaluator.hpp).
#include "train/evaluator.hpp"

#include "core/phase_clock.hpp"

namespace dtrain {

EvalResult Evaluator::validate() {
  PhaseScope phase(Phase::eval);
  if (valid_parts_.empty()) return run(valid_, valid_samples_);
  EvalResult all;
  double loss_sum = 0;
  for (const Part& p : valid_parts_) {
    const EvalResult r = run(*p.data, valid_samples_);
    all.parts.push_back({p.name, r.loss, r.rows, r.metric});
    loss_sum += r.loss * double(r.rows);
    all.rows += r.rows;
    all.metric += r.metric;
  }
  all.loss = all.rows > 0 ? loss_sum / double(all.rows) : 0.0;
  return all;
}

EvalResult Evaluator::test() { return run(test_, 0); }

EvalResult Evaluator::run(const Dataset& data, int64_t max_samples) {
  const PassLoss pass = [this](const BatchView& batch, const StepContext& ctx) { return model_.eval_sums(batch, ctx); };
  return evaluate(pass, model_.eval_in_lockstep(), data, micro_batch_, max_samples, precision_, &dp_);
}

}  // namespace dtrain
