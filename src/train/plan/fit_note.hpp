// What `dtrain train` adds to its out-of-memory message: the planner's fastest layout of the job's
// world that fits the memory a rank has.
#pragma once
#include <string>

#include "train/config.hpp"

namespace dtrain {

// "; the planner finds one that fits: dp_shard 2, recompute selective (3.1 GiB per rank of 5.4): --set
// parallel.dp_shard=2 … (see `dtrain plan --config …`)", or "" when none of the world's layouts fits
// `bytes_per_rank` or the model cannot be planned. Times by configs/hardware/`profile` where found.
std::string fitting_layout_note(const RunConfig& cfg, int world, double bytes_per_rank, const std::string& profile);

}  // namespace dtrain
