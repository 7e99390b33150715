// Boxes: rectangular regions of a row-major tensor (an offset and a size per dimension). A
// checkpoint stores each tensor as boxes (chunks); a rank reads the parts of saved boxes that
// intersect the boxes it holds, whatever layout wrote them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct Box {
  std::vector<int64_t> offsets, sizes;
  int64_t volume() const;
  bool operator==(const Box&) const = default;
};

// The whole of a tensor of `shape` (a scalar is treated as shape [1]).
Box whole_box(const std::vector<int64_t>& shape);

// The common part of two boxes of one tensor, or none when they do not overlap.
std::optional<Box> intersect(const Box& a, const Box& b);

// The elements [begin, end) of a row-major tensor as boxes in row-major order, each one contiguous
// in memory: a partial row, whole rows, a partial row (recursively for more dimensions).
std::vector<Box> boxes_of_flat_range(const std::vector<int64_t>& shape, int64_t begin, int64_t end);

// `box` cut into contiguous pieces of at most max_elems elements (along its first dimension, then the
// next), in row-major order. A single element larger than the limit stays whole.
std::vector<Box> split_box(const Box& box, int64_t max_elems);

// How `boxes` fail to tile `whole` exactly once (every element of whole in exactly one box, no box
// outside it), as a phrase such as "chunks 1 and 2 overlap in [0:4, 0:8]"; "" when they tile it.
// Boxes are named by their position in the list.
std::string tiling_problem(const Box& whole, const std::vector<Box>& boxes);

// "[0:4, 0:8]": the box's index ranges per dimension (offset : offset + size).
std::string box_str(const Box& box);

// Index (in elements) of `inner`'s first element within the row-major data of `outer`.
int64_t offset_within(const Box& outer, const Box& inner);

// Copies `region` (inside both boxes) from src, the row-major data of src_box, into dst, the
// row-major data of dst_box. elem: bytes per element.
void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, size_t elem);

}  // namespace dtrain
