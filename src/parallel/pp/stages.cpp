// Stage cutting (see stages.hpp): a small dynamic programme over contiguous partitions.
#include "parallel/pp/stages.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.hpp"

namespace dtrain {

std::vector<int> balanced_stages(const std::vector<double>& costs, int stages) {
  const int n = int(costs.size());
  require(stages <= n, "the pipeline has " + std::to_string(stages) + " stages but the model only " +
                           std::to_string(n) + " units (its input unit, " + std::to_string(n - 2) +
                           " in between, its loss unit): give it more (e.g. more layers), or lower "
                           "parallel.pp or parallel.pp_virtual");
  std::vector<double> prefix(size_t(n + 1), 0.0);
  for (int i = 0; i < n; ++i) prefix[size_t(i + 1)] = prefix[size_t(i)] + costs[size_t(i)];
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: the least possible largest stage cost for units [0, i) in s stages
  std::vector<std::vector<double>> best(size_t(stages + 1), std::vector<double>(size_t(n + 1), inf));
  std::vector<std::vector<int>> from(size_t(stages + 1), std::vector<int>(size_t(n + 1), -1));
  best[0][0] = 0.0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= n; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double v = std::max(best[size_t(s - 1)][size_t(j)], prefix[size_t(i)] - prefix[size_t(j)]);
        if (v < best[size_t(s)][size_t(i)]) {
          best[size_t(s)][size_t(i)] = v;
          from[size_t(s)][size_t(i)] = j;
        }
      }
  std::vector<int> b(size_t(stages + 1));
  b[size_t(stages)] = n;
  for (int s = stages; s > 0; --s) b[size_t(s - 1)] = from[size_t(s)][size_t(b[size_t(s)])];
  return b;
}

std::vector<int> cut_stages(const std::vector<double>& costs, int stages, const std::vector<int>& split) {
  if (split.empty()) return balanced_stages(costs, stages);
  const int n = int(costs.size());
  auto listed = [&] {
    std::string s;
    for (int x : split) s += (s.empty() ? "" : ",") + std::to_string(x);
    return s;
  };
  require(int(split.size()) == stages - 1,
          "parallel.pp_split = " + listed() + " gives " + std::to_string(split.size() + 1) + " stages, the pipeline has " +
              std::to_string(stages) + ": list the first unit of every stage but the first (" +
              std::to_string(stages - 1) + " numbers)");
  std::vector<int> b{0};
  for (int x : split) {
    require(x > b.back() && x < n, "parallel.pp_split = " + listed() + ": stage boundaries must rise strictly within 1.." +
                                       std::to_string(n - 1) + " (units: 0 the input unit, " + std::to_string(n - 1) +
                                       " the loss unit), so that every stage has a unit and none is left out");
    b.push_back(x);
  }
  b.push_back(n);
  return b;
}

std::vector<std::pair<int, int>> stage_ranges(const std::vector<int>& bounds, const std::vector<int>& stages) {
  std::vector<std::pair<int, int>> r;
  for (int s : stages) r.emplace_back(bounds[size_t(s)], bounds[size_t(s + 1)]);
  return r;
}

}  // namespace dtrain
