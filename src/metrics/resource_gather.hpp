// The resource samples of every rank brought together (collectives over the group of all ranks),
// so that rank 0 can write them (World::hosts() names their hosts).
#pragma once
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "metrics/resource_sampler.hpp"

namespace dtrain {

// Every rank's samples, rank by rank in group order (each rank's oldest first), on every rank: an
// allgather of the counts, then of the samples as 10 doubles each. Ranks may hold different
// numbers of samples, none included. Collective: every rank of `all` calls it.
std::vector<ResourceSample> gather_resource_samples(ProcessGroup& all, const std::vector<ResourceSample>& mine);

}  // namespace dtrain
