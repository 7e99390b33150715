// Unit parameter bookkeeping and seeded initialisation.
#include "nn/unit.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/philox.hpp"

namespace dtrain {

ParamRef Unit::add(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in) {
  ParamInfo p{name, std::move(shape), init, fan_in, numel_};
  numel_ += (p.numel() + 15) / 16 * 16;  // 64-byte aligned parameters within the unit
  params_.push_back(std::move(p));
  return ParamRef{this, params_.size() - 1};
}

void init_unit_range(const Unit& u, uint32_t first_index, uint64_t seed, int64_t lo, int64_t hi, float* out) {
  DT_ASSERT(0 <= lo && lo <= hi && hi <= u.numel());
  std::fill(out, out + (hi - lo), 0.0f);  // the padding between parameters
  for (size_t i = 0; i < u.params().size(); ++i) {
    const ParamInfo& p = u.params()[i];
    const int64_t from = std::max(lo, p.offset), to = std::min(hi, p.offset + p.numel());
    if (from >= to) continue;
    const RandomStream rs = init_stream(seed, first_index + uint32_t(i));
    float bound = 0.0f;
    switch (p.init) {
      case Init::zeros: bound = 0.0f; break;
      case Init::ones:
        std::fill(out + (from - lo), out + (to - lo), 1.0f);
        continue;
      case Init::xavier: bound = std::sqrt(6.0f / float(p.shape[0] + p.shape[1])); break;
      case Init::fan_in_uniform: bound = 1.0f / std::sqrt(float(p.fan_in)); break;
    }
    for (int64_t e = from; e < to; ++e) out[e - lo] = (2.0f * rs.uniform(uint64_t(e - p.offset)) - 1.0f) * bound;
  }
}

void init_parameters(const std::vector<Unit*>& units, uint64_t seed) {
  uint32_t index = 0;
  for (Unit* u : units) {
    init_unit_range(*u, index, seed, 0, u->numel(), u->param_data());
    index += uint32_t(u->params().size());
  }
}

}  // namespace dtrain
