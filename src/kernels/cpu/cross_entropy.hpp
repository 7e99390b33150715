// Fused classifier + softmax cross-entropy: logits are computed a chunk of rows at a time and
// never stored whole, and in training the gradients come out of the same pass. Vocabulary
// parallel: a slice of the classifier's rows, whose per-row max, sum of exponentials and target
// logit are combined with the other slices' through a RowStatsCombiner (never the logits).
#pragma once
#include <cstdint>

#include "kernels/cpu/matmul.hpp"

namespace dtrain {

// Combines per-row statistics with the other vocabulary slices' (in place, n values): the maximum,
// and the sum. Values are in the memory of the device the kernel runs on.
struct RowStatsCombiner {
  virtual ~RowStatsCombiner() = default;
  virtual void max(float* v, int64_t n) = 0;
  virtual void sum(float* v, int64_t n) = 0;
};

struct ClassifierArgs {
  const float* x;        // [N, d] final hidden states
  const float* W;        // [V, d]
  const float* bias;     // [V] or null
  const int32_t* targets;  // [N]
  int64_t N, d, V;  // V: the classifier rows held (the vocabulary slice's size)
  Precision precision = Precision::f32;
  // Vocabulary parallel: W's row 0 is word vocab_begin, and `combine` joins the other slices. Rows
  // from `words` on pad the slice (a vocabulary the slices do not divide): their logits are left
  // out of the softmax and get no gradient. -1: every row is a word.
  int64_t vocab_begin = 0;
  int64_t words = -1;
  RowStatsCombiner* combine = nullptr;
  // When set, the rows whose prediction is their target are added to *correct (memory of the device
  // the kernel runs on): a classifier's right predictions, the prediction being the first class with
  // the highest score, as argmax picks (on CUDA across vocabulary slices, a tie with the target counts
  // as right).
  double* correct = nullptr;
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
