// Aligning the ranks' clocks for a trace: every rank's monotonic clock against rank 0's, measured
// by round trips (rank 0 sends, the rank answers with its clock; the offset is taken from the
// round trip with the least delay, its error at most half that delay).
#pragma once
#include <vector>

#include "comm/process_group.hpp"

namespace dtrain {

struct ClockOffsets {
  std::vector<double> offset_s;  // per rank: its monotonic_seconds() − rank 0's at the same instant
  std::vector<double> error_s;   // per rank: the bound on that offset's error (half the best round trip)
};

// Collective over `all`; every rank gets the whole table.
ClockOffsets measure_clock_offsets(ProcessGroup& all, int rounds = 8);

}  // namespace dtrain
