// global_boxes and as_slice (see tp_boxes.hpp).
#include "train/checkpoint/tp_boxes.hpp"

#include <algorithm>

namespace dtrain {

std::vector<std::pair<Box, int64_t>> global_boxes(const ParamInfo& p, const Box& local) {
  if (!p.is_cut()) return {{local, 0}};
  const size_t dim = size_t(p.split.dim);
  const int64_t part = p.shape[dim] / p.split.blocks, block = p.global_shape[dim] / p.split.blocks;
  std::vector<std::pair<Box, int64_t>> out;
  const int64_t lo = local.offsets[dim], hi = lo + local.sizes[dim];
  for (int64_t at = lo; at < hi;) {
    const int64_t b = at / part, end = std::min(hi, (b + 1) * part);  // within one block
    Box piece = local;
    piece.offsets[dim] = at;
    piece.sizes[dim] = end - at;
    const int64_t within = offset_within(local, piece);
    const int64_t from = p.split_offset + (at - b * part);  // within the global block
    piece.offsets[dim] = b * block + from;
    piece.sizes[dim] = std::min(piece.sizes[dim], block - from);  // padding past the end is not stored
    if (piece.sizes[dim] > 0) out.push_back({piece, within});
    at = end;
  }
  return out;
}

ParamInfo as_slice(const ParamInfo& p, int index) {
  ParamInfo q = p;
  if (p.is_cut()) q.split_offset = p.shape[size_t(p.split.dim)] / p.split.blocks * index;  // padded share
  return q;
}

}  // namespace dtrain
