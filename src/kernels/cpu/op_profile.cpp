// HostOpProfile (see op_profile.hpp).
#include "kernels/cpu/op_profile.hpp"

#include <algorithm>

namespace dtrain {

void HostOpProfile::add(const char* name, double seconds, double flops) {
  OpTime& t = sums_[name];
  if (t.name.empty()) t.name = name;
  t.seconds += seconds;
  t.flops += flops;
  ++t.calls;
}

std::vector<OpTime> HostOpProfile::take() {
  std::vector<OpTime> out;
  for (auto& [name, t] : sums_) out.push_back(t);
  sums_.clear();
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace dtrain
