// The kernel contract's host-side helper (see types.hpp): the sinusoidal position table, made once on
// the host for any device.
#include "kernels/types.hpp"

#include <cmath>

namespace dtrain {

void sinusoidal_table(float* table, int64_t T, int64_t d) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d; i += 2) {
      const double freq = std::pow(10000.0, -double(i) / double(d));
      table[t * d + i] = float(std::sin(double(t) * freq));
      if (i + 1 < d) table[t * d + i + 1] = float(std::cos(double(t) * freq));
    }
}

}  // namespace dtrain
