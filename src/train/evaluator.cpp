// Evaluator (see evaluator.hpp).
#include "train/evaluator.hpp"

#include "core/phase_clock.hpp"

namespace dtrain {

EvalResult Evaluator::validate() {
  PhaseScope phase(Phase::eval);
  return run(valid_, valid_samples_);
}

EvalResult Evaluator::test() { return run(test_, 0); }

EvalResult Evaluator::run(const Dataset& data, int64_t max_samples) {
  const PassLoss pass = [this](const BatchView& batch, const StepContext& ctx) { return model_.eval_sums(batch, ctx); };
  return evaluate(pass, model_.eval_in_lockstep(), data, micro_batch_, max_samples, precision_, &dp_);
}

}  // namespace dtrain
