// `dtrain eval`: a checkpoint's loss and metric on a split of its data (the data it was trained on,
// or --data), and a classifier's confusion matrix.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "nn/context.hpp"

namespace dtrain {

struct EvalOptions {
  std::string checkpoint;
  std::string data;            // "": the data dir the checkpoint's run trained on
  std::string split = "test";  // valid, test or train
  int64_t batch_size = 64;
  Precision precision = Precision::f32;
};

// Prints the split's loss and metric (and a classifier's confusion matrix) to `out`. Error for a
// checkpoint that does not fit the data, and for weights whose loss is not finite.
void evaluate_checkpoint(const EvalOptions& o, std::FILE* out);

}  // namespace dtrain
