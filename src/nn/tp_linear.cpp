// Linear layers at tensor-parallel region edges, their collectives overlapped (see tp_linear.hpp).
#include "nn/tp_linear.hpp"

namespace dtrain {

void column_parallel_forward(TpRegions& regions, const Linear& l, const float* x_local, float* gathered, float* y,
                             int64_t rows, Precision p) {
  regions.all_rows_then(x_local, gathered, rows, l.in, [&](int64_t r0, int64_t n, const float* x) {
    l.forward(x, y + r0 * l.out, n, p);
  });
}

float* row_parallel_forward(TpRegions& regions, const Linear& l, const float* x, float* partial, float* local,
                            int64_t rows, Precision p) {
  return regions.sum_partials_of(partial, local, rows, l.out, [&](int64_t r0, int64_t n) {
    l.forward(x + r0 * l.in, partial + r0 * l.out, n, p);
  });
}

void column_parallel_backward_input(TpRegions& regions, const Linear& l, const float* dy, float* partial, float* spare,
                                    float* du, bool accumulate, int64_t rows, int64_t local_rows, Precision p,
                                    const std::function<void()>& weight_half) {
  l.backward_input(dy, partial, rows, false, p);
  PendingSum sum = regions.sum_partials_begin(partial, spare, rows, l.in);
  weight_half();
  const float* total = sum.finish();
  const int64_t n = local_rows * l.in;
  if (accumulate)
    l.dev->add(du, total, du, n);
  else
    l.dev->copy(du, total, sizeof(float) * size_t(n));
}

}  // namespace dtrain
