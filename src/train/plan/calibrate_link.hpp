// The node's link for `dtrain plan --calibrate`: all-reduces between two local processes over Gloo,
// as many pairs at once as the node's ranks make.
#pragma once
#include "train/plan/hardware.hpp"

namespace dtrain {

// Measures, on as many pairs of local processes at once as `ranks_per_node` makes (at least one),
// an all-reduce's seconds at sizes from 4 bytes to 64 MiB beside a computation and alone
// (h.allreduce_bytes, allreduce_seconds, allreduce_alone_seconds), what it takes of the computation
// beside it (h.allreduce_steal_seconds) and how unevenly ranks reach it (h.jitter); returns the link as bus GB/s at
// 64 MiB and latency µs from 4 bytes.
Link measure_node_link(Hardware& h, int ranks_per_node);

}  // namespace dtrain
