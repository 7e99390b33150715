// Fused classifier + softmax cross-entropy: logits are computed a chunk of rows at a time and
// never stored whole, and in training the gradients come out of the same pass.
#pragma once
#include <cstdint>

#include "kernels/cpu/matmul.hpp"

namespace dtrain {

struct ClassifierArgs {
  const float* x;        // [N, d] final hidden states
  const float* W;        // [V, d]
  const float* bias;     // [V] or null
  const int32_t* targets;  // [N]
  int64_t N, d, V;
  Precision precision = Precision::f32;
  // Training: when dx is set, dx [N, d] is overwritten and dW [V, d], dbias [V] accumulated with
  // the gradient of grad_scale * sum of row losses.
  float grad_scale = 0.0f;
  float* dx = nullptr;
  float* dW = nullptr;
  float* dbias = nullptr;
};

// Returns the sum over rows of -log softmax(x W^T + b)[target]; per_row (optional) gets each loss.
double classifier_cross_entropy(const ClassifierArgs& a, float* per_row = nullptr);

// Plain logits for the last `rows` rows (generation, parity checks): out [rows, V].
void classifier_logits(const float* x, const float* W, const float* bias, float* out, int64_t rows,
                       int64_t d, int64_t V, Precision p);

}  // namespace dtrain
