// `dtrain plan --calibrate`: this machine's hardware profile, measured — matrix products per precision
// on the CPU device, the bandwidth element-wise kernels stream, the process's own memory, and
// all-reduce bandwidth and latency between two local ranks over Gloo.
#pragma once
#include "train/plan/hardware.hpp"

namespace dtrain {

// `ranks_per_node`: the ranks a job would run here, each with `threads` threads (0: cores /
// ranks_per_node); every rank measures at once, the figures are one rank's.
Hardware calibrate_this_machine(int ranks_per_node, int threads = 0);

}  // namespace dtrain
