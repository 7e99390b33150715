// Unit parameter bookkeeping and seeded initialisation.
#include "nn/unit.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/philox.hpp"

namespace dtrain {

ParamRef Unit::add(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in, TpSplit split,
                   TpSlice slice) {
  ParamInfo p{name, shape, init, fan_in, numel_, shape, split};
  if (split.dim >= 0 && slice.count > 1) {
    // a share that does not divide (the vocabulary) is padded: the last slices hold rows past the end
    const int64_t block = shape[size_t(split.dim)] / split.blocks, part = (block + slice.count - 1) / slice.count;
    DT_ASSERT(block * split.blocks == shape[size_t(split.dim)] && (split.blocks == 1 || part * slice.count == block));
    p.shape[size_t(split.dim)] = part * split.blocks;
    p.split_offset = part * slice.index;
  }
  numel_ += (p.numel() + 15) / 16 * 16;  // 64-byte aligned parameters within the unit
  p.index = next_index_++;
  params_.push_back(std::move(p));
  return ParamRef{this, params_.size() - 1};
}

int64_t ParamInfo::global_element(int64_t e) const {
  if (!is_cut()) return e;
  const size_t dim = size_t(split.dim);
  int64_t inner = 1;  // elements per step along dim
  for (size_t i = dim + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t outer = e / (inner * shape[dim]), at = (e / inner) % shape[dim], within = e % inner;
  const int64_t part = shape[dim] / split.blocks, block = global_shape[dim] / split.blocks;
  const int64_t g = (at / part) * block + split_offset + at % part;
  if (split_offset + at % part >= block) return -1;  // padding past the end
  return (outer * global_shape[dim] + g) * inner + within;
}

void init_unit_range(const Unit& u, uint64_t seed, int64_t lo, int64_t hi, float* out) {
  DT_ASSERT(0 <= lo && lo <= hi && hi <= u.numel());
  std::fill(out, out + (hi - lo), 0.0f);  // the padding between parameters
  for (size_t i = 0; i < u.params().size(); ++i) {
    const ParamInfo& p = u.params()[i];
    const int64_t from = std::max(lo, p.offset), to = std::min(hi, p.offset + p.numel());
    if (from >= to) continue;
    const RandomStream rs = init_stream(seed, u.first_index() + p.index);
    float bound = 0.0f;
    switch (p.init) {
      case Init::zeros: bound = 0.0f; break;
      case Init::ones:
        for (int64_t e = from; e < to; ++e) out[e - lo] = p.global_element(e - p.offset) < 0 ? 0.0f : 1.0f;
        continue;
      case Init::xavier: bound = std::sqrt(6.0f / float(p.global_shape[0] + p.global_shape[1])); break;
      case Init::fan_in_uniform: bound = 1.0f / std::sqrt(float(p.fan_in)); break;
    }
    for (int64_t e = from; e < to; ++e) {
      const int64_t g = p.global_element(e - p.offset);
      out[e - lo] = g < 0 ? 0.0f : (2.0f * rs.uniform(uint64_t(g)) - 1.0f) * bound;
    }
  }
}

void init_parameters(const std::vector<Unit*>& units, uint64_t seed) {
  for (Unit* u : units) init_unit_range(*u, seed, 0, u->numel(), u->param_data());
}

}  // namespace dtrain
