// Fused classifier + softmax cross-entropy: logits are computed a piece of rows at a time and never
// stored whole, and in training the gradients come out of the same pass (a chunk of pieces at a
// time feeds the two gradient products). Vocabulary
// parallel: a slice of the classifier's rows, whose per-row max, sum of exponentials and target
// logit are combined with the other slices' through a RowStatsCombiner (never the logits).
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// Returns the sum over rows of -log softmax(x W^T + b)[target]; per_row (optional) gets each loss.
double classifier_cross_entropy(const ClassifierArgs& a, float* per_row = nullptr);
// The rows of a chunk (the gradient products' M for dx and K for dW), and the floats of its scratch
// (the logits of a chunk in f32, of a piece in bf16; a piece's row statistics; the bias sums).
// bf16_products: whether the CPU has bf16 products (classifier_cross_entropy asks this one,
// bf16_products_for(a.precision); the planner tells its profile's).
int64_t classifier_chunk_rows(const ClassifierArgs& a, bool bf16_products);
int64_t classifier_scratch_floats(const ClassifierArgs& a, bool bf16_products);
// Whether its products run in bf16 from operands rounded once (matmul_bf16_copy): the weights [V, d]
// per call (unless given in bf16), a chunk's inputs [rows, d] and, training, its logits' gradient
// [rows, V] per chunk.
bool classifier_converts_once(const ClassifierArgs& a, bool bf16_products);

// Plain logits for the last `rows` rows (generation, parity checks): out [rows, V].
void classifier_logits(const float* x, const float* W, const float* bias, float* out, int64_t rows,
                       int64_t d, int64_t V, Precision p);

}  // namespace dtrain
