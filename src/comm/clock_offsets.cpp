// Clock offsets by round trips from rank 0 (see clock_offsets.hpp).
#include "comm/clock_offsets.hpp"

#include <limits>

#include "core/phase_clock.hpp"

namespace dtrain {

ClockOffsets measure_clock_offsets(ProcessGroup& all, int rounds) {
  const int R = all.size(), me = all.rank();
  std::vector<double> table(size_t(2 * R), 0.0);  // offset, error per rank
  constexpr uint32_t kTag = 0x7C10C;
  for (int r = 1; r < R; ++r) {
    if (me == 0) {
      double best = std::numeric_limits<double>::infinity();
      for (int k = 0; k < rounds; ++k) {
        double theirs = 0.0;
        const double sent = monotonic_seconds();
        all.send_async(&sent, sizeof sent, r, kTag)->wait();
        all.recv_async(&theirs, sizeof theirs, r, kTag)->wait();
        const double back = monotonic_seconds();
        if (back - sent < best) {
          best = back - sent;
          table[size_t(2 * r)] = theirs - (sent + back) / 2;
          table[size_t(2 * r + 1)] = best / 2;
        }
      }
    } else if (me == r) {
      for (int k = 0; k < rounds; ++k) {
        double sent = 0.0;
        all.recv_async(&sent, sizeof sent, 0, kTag)->wait();
        const double now = monotonic_seconds();
        all.send_async(&now, sizeof now, 0, kTag)->wait();
      }
    }
  }
  all.broadcast(table.data(), table.size(), ElemType::f64, 0);
  ClockOffsets out;
  for (int r = 0; r < R; ++r) {
    out.offset_s.push_back(table[size_t(2 * r)]);
    out.error_s.push_back(table[size_t(2 * r + 1)]);
  }
  return out;
}

}  // namespace dtrain
