// A run's evaluations as the loop sees them: which steps validate (train.eval_every), on how much of
// the split (train.eval_max_batches global batches), and the final test, through every stage of this
// rank's part of the model and shared out over the data-parallel ranks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/plan.hpp"
#include "train/evaluate.hpp"

namespace dtrain {

class Evaluator {
 public:
  // A named part of the validation split (a mix's source), validated alone.
  struct Part {
    std::string name;
    const Dataset* data;
  };
  // valid_samples: the validation's samples (0: all; of each part, when there are parts); micro_batch:
  // samples per rank and pass; valid_parts: when given, validation runs on each and sums them.
  Evaluator(ParallelModel& model, const Dataset& valid, const Dataset& test, int64_t micro_batch, int64_t valid_samples,
            Precision precision, ProcessGroup& dp, int64_t every, std::vector<Part> valid_parts = {})
      : model_(model),
        valid_parts_(std::move(valid_parts)),
        valid_(valid),
        test_(test),
        micro_batch_(micro_batch),
        valid_samples_(valid_samples),
        precision_(precision),
        dp_(dp),
        every_(every) {}

  bool due(int64_t step) const { return every_ > 0 && step % every_ == 0; }
  EvalResult validate();  // collective; its time counts as the eval phase
  EvalResult test();      // the whole test split; collective

 private:
  EvalResult run(const Dataset& data, int64_t max_samples);

  ParallelModel& model_;
  std::vector<Part> valid_parts_;
  const Dataset& valid_;
  const Dataset& test_;
  int64_t micro_batch_, valid_samples_;
  Precision precision_;
  ProcessGroup& dp_;
  int64_t every_;
};

}  // namespace dtrain
