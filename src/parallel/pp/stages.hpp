// Cutting the model's units (numbered in order: 0 the input unit, the loss unit last) into the
// contiguous stages of a pipeline: balanced by cost, or where the user says (parallel.pp_split).
#pragma once
#include <utility>
#include <vector>


namespace dtrain {

// Stage boundaries b[0] = 0 < b[1] < … < b[stages] = units: stage s runs units [b[s], b[s+1]).
// Balanced: the most expensive stage as cheap as it can be. Throws Error when there are fewer units
// than stages.
std::vector<int> balanced_stages(const std::vector<double>& costs, int stages);

// The stages of a model whose units cost `costs` (its kind's training FLOPs per sample of each):
// balanced, or from `split` (the first unit of every stage but the first, ascending), which must
// give every stage at least one unit and leave none out; Error otherwise.
std::vector<int> cut_stages(const std::vector<double>& costs, int stages, const std::vector<int>& split);

// The [first, last) unit ranges of the given stages.
std::vector<std::pair<int, int>> stage_ranges(const std::vector<int>& bounds, const std::vector<int>& stages);

}  // namespace dtrain
