// Where a tensor-parallel slice's part of a parameter lies in the global tensor: boxes of the
// global tensor, so checkpoints store and read slices under global names and coordinates.
#pragma once
#include <utility>
#include <vector>

#include "ckpt/box.hpp"
#include "nn/unit.hpp"

namespace dtrain {

// The global boxes of `local`, a box of this slice's part of p (in its local shape whose row-major
// data is contiguous), each with the offset in elements of its data within local's data. Padding
// (rows past the end of a padded vocabulary slice) has no global box.
std::vector<std::pair<Box, int64_t>> global_boxes(const ParamInfo& p, const Box& local);

// p as slice `index` of the same cut holds it.
ParamInfo as_slice(const ParamInfo& p, int index);

}  // namespace dtrain
