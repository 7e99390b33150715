// Unit parameter bookkeeping and seeded initialisation.
#include "nn/unit.hpp"

#include <cmath>

#include "core/philox.hpp"

namespace dtrain {

ParamRef Unit::add(const std::string& name, std::vector<int64_t> shape, Init init, int64_t fan_in) {
  ParamInfo p{name, std::move(shape), init, fan_in, numel_};
  numel_ += (p.numel() + 15) / 16 * 16;  // 64-byte aligned parameters within the unit
  params_.push_back(std::move(p));
  return ParamRef{this, params_.size() - 1};
}

void init_parameters(const std::vector<Unit*>& units, uint64_t seed) {
  uint32_t index = 0;
  for (Unit* u : units)
    for (size_t i = 0; i < u->params().size(); ++i, ++index) {
      const ParamInfo& p = u->params()[i];
      float* x = u->param_data() + p.offset;
      const int64_t n = p.numel();
      const RandomStream rs = init_stream(seed, index);
      float bound = 0.0f;
      switch (p.init) {
        case Init::zeros: bound = 0.0f; break;
        case Init::ones:
          for (int64_t j = 0; j < n; ++j) x[j] = 1.0f;
          continue;
        case Init::xavier: bound = std::sqrt(6.0f / float(p.shape[0] + p.shape[1])); break;
        case Init::fan_in_uniform: bound = 1.0f / std::sqrt(float(p.fan_in)); break;
      }
      for (int64_t j = 0; j < n; ++j) x[j] = (2.0f * rs.uniform(uint64_t(j)) - 1.0f) * bound;
    }
}

}  // namespace dtrain
