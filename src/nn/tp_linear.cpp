// Linear layers at tensor-parallel region edges, their collectives overlapped (see tp_linear.hpp).
#include "nn/tp_linear.hpp"

namespace dtrain {

void column_parallel_forward(TpRegions& regions, const Linear& l, Operand x_local, void* gathered, float* y,
                             int64_t rows, Precision p, bool relu) {
  regions.all_rows_then(x_local, gathered, rows, l.in, [&](int64_t r0, int64_t n, Operand x) {
    l.forward(x, y + r0 * l.out, n, p, relu);
  });
}

float* row_parallel_forward(TpRegions& regions, const Linear& l, Operand x, float* partial, float* local,
                            int64_t rows, Precision p) {
  return regions.sum_partials_of(partial, local, rows, l.out, [&](int64_t r0, int64_t n) {
    l.forward(x.at(r0 * l.in), partial + r0 * l.out, n, p);
  });
}

void LinearBackward::operator()(const Linear& l, Operand x, bool x_lives, Operand dy, float* dx, int64_t rows,
                                bool accumulate, Precision p) const {
  if (part == BackwardPart::all) {
    l.backward(x, dy, dx, rows, accumulate, p);
    return;
  }
  l.backward_input(dy, dx, rows, accumulate, p);
  store->add(l, x, x_lives, dy, rows, p);
}

void LinearBackward::weight(const Linear& l, Operand x, bool x_lives, Operand dy, int64_t rows,
                            Precision p) const {
  if (part == BackwardPart::all)
    l.backward_weight(x, dy, rows, p);
  else
    store->add(l, x, x_lives, dy, rows, p);
}

void column_parallel_backward(TpRegions& regions, const TpSlice& slice, const LinearBackward& grads, const Linear& l,
                              Operand x_local, void* gathered, Operand dy, float* partial, float* spare,
                              float* du, bool accumulate, int64_t rows, Precision p) {
  const Operand x = regions.all_rows(x_local, gathered, rows, l.in);
  const bool x_lives = !slice.splits_rows();  // else gathered into the workspace
  if (slice.count == 1) {
    grads(l, x, x_lives, dy, du, rows, accumulate, p);
    return;
  }
  l.backward_input(dy, partial, rows, false, p);
  PendingSum sum = regions.sum_partials_begin(partial, spare, rows, l.in);
  grads.weight(l, x, x_lives, dy, rows, p);
  const float* total = sum.finish();
  const int64_t n = slice.local_rows(rows) * l.in;
  if (accumulate)
    l.dev->add(du, total, du, n);
  else
    l.dev->copy(du, total, sizeof(float) * size_t(n));
}

}  // namespace dtrain
