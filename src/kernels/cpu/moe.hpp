// Mixture-of-experts routing, dispatch and combine on the CPU (MoeRouting in kernels/types.hpp): a
// token's scores and top-k experts, the chosen tokens grouped by expert for the experts' products,
// and the weighted sum back; each with its backward. Deterministic: ties to the lower expert index,
// grouped rows in token order, every sum in a fixed order (the same for any thread count).
#pragma once
#include <cstdint>

#include "kernels/types.hpp"

namespace dtrain {

// From logits [rows, E]: scores [rows, E], chosen [rows, k] (expert ids, best first), weights
// [rows, k], counts [E] (token copies each expert takes), offsets [E + 1], row_of [offsets[E]], pos
// [rows·k] (where each copy stands among the grouped rows; -1: dropped by the capacity).
void moe_route(const float* logits, float* scores, int32_t* chosen, float* weights, int64_t* counts,
               int64_t* offsets, int32_t* row_of, int32_t* pos, const MoeRouting& r);
// grouped [rows·k, d]: grouped[p] = x[row_of[p]].
void moe_gather(const float* x, const int32_t* row_of, float* grouped, int64_t n, int64_t d);
// y [rows, d] = Σ_j weights[r, j] · grouped[pos[r·k + j]] (j ascending, dropped copies left out);
// weights null: all 1 (the gather's backward: dx from the grouped rows' gradient).
void moe_combine(const float* grouped, const int32_t* pos, const float* weights, float* y, const MoeRouting& r,
                 int64_t d);
// The combine's backward: dgrouped[pos[r·k + j]] = weights[r, j] · dy[r]; dweights[r, j] = dy[r] ·
// grouped[pos[r·k + j]] (a dropped copy: dweights 0).
void moe_combine_backward(const float* dy, const float* grouped, const int32_t* pos, const float* weights,
                          float* dgrouped, float* dweights, const MoeRouting& r, int64_t d);
// The router's backward: dlogits [rows, E] (written) from the weights' gradient dweights [rows, k]
// (through the renormalisation and the scores of the chosen experts) plus dscores [rows, E] (an
// added gradient on every score, e.g. the balance loss's; null: none).
void moe_route_backward(const float* scores, const int32_t* chosen, const float* dweights, const float* dscores,
                        float* dlogits, const MoeRouting& r);

}  // namespace dtrain
