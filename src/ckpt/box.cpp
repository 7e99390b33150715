// Boxes of row-major tensors (see box.hpp).
#include "ckpt/box.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace dtrain {

int64_t Box::volume() const {
  int64_t v = 1;
  for (int64_t s : sizes) v *= s;
  return v;
}

Box whole_box(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {{0}, {1}};
  return {std::vector<int64_t>(shape.size(), 0), shape};
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  DT_ASSERT(a.offsets.size() == b.offsets.size());
  Box r;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    const int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    const int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    r.offsets.push_back(lo);
    r.sizes.push_back(hi - lo);
  }
  return r;
}

std::string box_str(const Box& box) {
  std::string s = "[";
  for (size_t d = 0; d < box.offsets.size(); ++d)
    s += (d ? ", " : "") + std::to_string(box.offsets[d]) + ":" + std::to_string(box.offsets[d] + box.sizes[d]);
  return s + "]";
}

std::string tiling_problem(const Box& whole, const std::vector<Box>& boxes) {
  const size_t dims = whole.sizes.size();
  int64_t covered = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    bool inside = b.offsets.size() == dims && b.sizes.size() == dims;
    for (size_t d = 0; inside && d < dims; ++d)
      inside = b.sizes[d] > 0 && b.offsets[d] >= whole.offsets[d] &&
               b.sizes[d] <= whole.offsets[d] + whole.sizes[d] - b.offsets[d];
    if (!inside) return "chunk " + std::to_string(i) + " " + box_str(b) + " lies outside " + box_str(whole);
    covered += b.volume();  // each is inside whole, so the sum stays far from overflow
  }
  // Overlaps: a sweep along the first dimension, each box compared with those still open there.
  std::vector<size_t> order(boxes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return boxes[a].offsets[0] < boxes[b].offsets[0]; });
  std::vector<size_t> open;
  for (size_t i : order) {
    const int64_t start = boxes[i].offsets[0];
    std::erase_if(open, [&](size_t j) { return boxes[j].offsets[0] + boxes[j].sizes[0] <= start; });
    for (size_t j : open)
      if (const auto common = intersect(boxes[i], boxes[j]))
        return "chunks " + std::to_string(std::min(i, j)) + " and " + std::to_string(std::max(i, j)) + " overlap in " +
               box_str(*common);
    open.push_back(i);
  }
  if (covered != whole.volume())  // no overlap, so the shortfall is uncovered elements
    return std::to_string(whole.volume() - covered) + " of its " + std::to_string(whole.volume()) +
           " elements are in no chunk";
  return "";
}

namespace {

// Appends the boxes of [begin, end) within the tensor shape[d:], prefixed by `prefix` (the fixed
// indices of the dimensions before d, each of size 1).
void flat_range_boxes(const std::vector<int64_t>& shape, size_t d, std::vector<int64_t>& prefix, int64_t begin,
                      int64_t end, std::vector<Box>& out) {
  if (begin >= end) return;
  auto emit = [&](int64_t first, int64_t count, size_t dim) {  // rows [first, first+count) of dim, whole below
    Box b;
    b.offsets = prefix;
    b.sizes.assign(prefix.size(), 1);
    b.offsets.push_back(first);
    b.sizes.push_back(count);
    for (size_t e = dim + 1; e < shape.size(); ++e) {
      b.offsets.push_back(0);
      b.sizes.push_back(shape[e]);
    }
    out.push_back(std::move(b));
  };
  int64_t row = 1;  // elements per index of dimension d
  for (size_t e = d + 1; e < shape.size(); ++e) row *= shape[e];
  if (d + 1 == shape.size()) return emit(begin, end - begin, d);
  const int64_t r0 = begin / row, r_end = end / row;
  if (begin % row != 0) {  // a partial first row
    prefix.push_back(r0);
    flat_range_boxes(shape, d + 1, prefix, begin % row, std::min(row, end - r0 * row), out);
    prefix.pop_back();
    begin = (r0 + 1) * row;
    if (begin >= end) return;
  }
  if (r_end > begin / row) emit(begin / row, r_end - begin / row, d);  // whole rows
  if (end % row != 0 && r_end * row >= begin) {  // a partial last row
    prefix.push_back(r_end);
    flat_range_boxes(shape, d + 1, prefix, 0, end % row, out);
    prefix.pop_back();
  }
}

}  // namespace

std::vector<Box> boxes_of_flat_range(const std::vector<int64_t>& shape_in, int64_t begin, int64_t end) {
  const std::vector<int64_t> shape = shape_in.empty() ? std::vector<int64_t>{1} : shape_in;
  std::vector<Box> out;
  std::vector<int64_t> prefix;
  flat_range_boxes(shape, 0, prefix, begin, end, out);
  return out;
}

std::vector<Box> split_box(const Box& box, int64_t max_elems) {
  const int64_t v = box.volume();
  if (v <= max_elems || v == 0) return {box};
  // the first dimension whose size is above 1 is the one to cut
  size_t d = 0;
  while (d + 1 < box.sizes.size() && box.sizes[d] == 1) ++d;
  int64_t inner = 1;
  for (size_t e = d + 1; e < box.sizes.size(); ++e) inner *= box.sizes[e];
  std::vector<Box> out;
  const int64_t per = std::max<int64_t>(1, max_elems / inner);
  for (int64_t i = 0; i < box.sizes[d]; i += per) {
    Box piece = box;
    piece.offsets[d] = box.offsets[d] + i;
    piece.sizes[d] = std::min(per, box.sizes[d] - i);
    if (piece.volume() > max_elems && d + 1 < box.sizes.size()) {
      for (Box& p : split_box(piece, max_elems)) out.push_back(std::move(p));
    } else {
      out.push_back(std::move(piece));
    }
  }
  return out;
}

int64_t offset_within(const Box& outer, const Box& inner) {
  int64_t off = 0;
  for (size_t d = 0; d < outer.sizes.size(); ++d) off = off * outer.sizes[d] + (inner.offsets[d] - outer.offsets[d]);
  return off;
}

void copy_region(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& region, size_t elem) {
  const size_t n = region.sizes.size();
  DT_ASSERT(n > 0 && src_box.sizes.size() == n && dst_box.sizes.size() == n);
  const size_t run = size_t(region.sizes[n - 1]) * elem;  // contiguous elements of the last dimension
  std::vector<int64_t> idx(region.offsets);               // the current run's first element
  const auto* s = static_cast<const char*>(src);
  auto* t = static_cast<char*>(dst);
  for (;;) {
    Box at{idx, std::vector<int64_t>(n, 1)};
    std::memcpy(t + size_t(offset_within(dst_box, at)) * elem, s + size_t(offset_within(src_box, at)) * elem, run);
    // next run: advance the dimensions before the last, odometer-style
    size_t d = n - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < region.offsets[d] + region.sizes[d]) break;
      idx[d] = region.offsets[d];
    }
  }
}

}  // namespace dtrain
