// train.global_batch's split over the data-parallel ranks (see global_batch.hpp).
#include "train/global_batch.hpp"

#include <numeric>

#include "core/error.hpp"

namespace dtrain {

std::string BatchSplit::describe(int dp) const {
  return "global batch " + std::to_string(global(dp)) + " = " + std::to_string(dp) + " data-parallel rank" +
         (dp == 1 ? "" : "s") + " × " + std::to_string(micro_batch) + " sample" + (micro_batch == 1 ? "" : "s") +
         " × " + std::to_string(accum) + " micro-step" + (accum == 1 ? "" : "s");
}

BatchSplit split_global_batch(int64_t global, int dp, int64_t max_per_rank) {
  require(global >= 1 && dp >= 1 && max_per_rank >= 1, "internal: split_global_batch of a non-positive size");
  if (global % dp != 0) {
    const int64_t below = global / dp * dp, above = below + dp;
    throw Error("train.global_batch = " + std::to_string(global) + " does not split over " + std::to_string(dp) +
                " data-parallel ranks: give a multiple of " + std::to_string(dp) + " (" +
                (below > 0 ? std::to_string(below) + " or " : std::string()) + std::to_string(above) +
                "), or leave train.global_batch unset");
  }
  const int64_t per_rank = global / dp;
  const int64_t least = (per_rank + max_per_rank - 1) / max_per_rank;  // micro-steps the memory bound needs
  // The smallest divisor of per_rank that is at least `least`: among the pairs (d, per_rank / d) with
  // d ≤ √per_rank (global is at most 2^31, so at most ~46,000 candidates).
  int64_t best = per_rank;
  for (int64_t d = 1; d * d <= per_rank; ++d) {
    if (per_rank % d != 0) continue;
    if (d >= least && d < best) best = d;
    if (per_rank / d >= least && per_rank / d < best) best = per_rank / d;
  }
  return {per_rank / best, best};
}

BatchSplit run_batch_split(int64_t global_batch, int64_t batch_size, int64_t grad_accum, int dp) {
  if (global_batch > 0) return split_global_batch(global_batch, dp, batch_size);
  return {batch_size, grad_accum};
}

void require_split_at_every_size(int64_t global, int min_nodes, int max_nodes, int workers_per_node,
                                 int ranks_per_copy) {
  int64_t every = 1;  // the least common multiple of the data-parallel sizes
  std::string first_bad;
  for (int64_t n = min_nodes; n <= max_nodes; ++n) {
    const int64_t world = n * workers_per_node;
    if (world % ranks_per_copy != 0) continue;
    const int64_t dp = world / ranks_per_copy;
    if (every < (int64_t(1) << 40)) every = std::lcm(every, dp);
    if (global % dp != 0 && first_bad.empty())
      first_bad = std::to_string(dp) + " data-parallel ranks of " + std::to_string(n) + (n == 1 ? " node" : " nodes");
  }
  if (first_bad.empty()) return;
  const int64_t suggested = (global + every - 1) / every * every;
  throw Error("train.global_batch = " + std::to_string(global) + " does not split over the " + first_bad +
              ", a size this elastic job (--nnodes " + std::to_string(min_nodes) + ":" + std::to_string(max_nodes) +
              ", " + std::to_string(workers_per_node) + " workers each) may come to: give a multiple of " +
              std::to_string(every) + " (e.g. " + std::to_string(suggested) + "), which every size keeps");
}

void require_copies_at_every_size(int min_nodes, int max_nodes, int workers_per_node, int tp, int pp, int cp) {
  for (int64_t n = min_nodes; n <= max_nodes; ++n) {
    const int64_t world = n * workers_per_node;
    if (world % (int64_t(tp) * pp * cp) == 0) continue;
    throw Error((cp > 1 ? "parallel.tp × parallel.cp × parallel.pp = " + std::to_string(tp) + " × " + std::to_string(cp)
                        : "parallel.tp × parallel.pp = " + std::to_string(tp)) +
                " × " + std::to_string(pp) +
                " ranks per model copy do not fit the " + std::to_string(world) +
                (world == 1 ? " worker" : " workers") + " of " + std::to_string(n) + (n == 1 ? " node" : " nodes") +
                ", a size this elastic job (--nnodes " +
                std::to_string(min_nodes) + ":" + std::to_string(max_nodes) + ", " + std::to_string(workers_per_node) +
                " workers each) may come to: raise MIN to a size they fit, or lower parallel.tp / parallel.pp" +
                (cp > 1 ? " / parallel.cp" : ""));
  }
}

double mean_over_data_parallel(World& world, int dp, double v) {
  if (dp > 1) world.all().allreduce(&v, 1, ReduceOp::avg);
  return v;
}

}  // namespace dtrain
