// What a tensor-parallel cut needs of a model's sizes: parallel.tp must divide each size the ranks
// hold whole shares of (heads, the feed-forward width; under sequence parallel, the positions).
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// Error unless `slices` divides `what` = value: "parallel.tp = 3 does not divide model.heads = 4: fix".
void require_tp_divides(int slices, const std::string& what, int64_t value, const std::string& fix);
// Sequence parallel splits each sample's positions: the same for model.seq_len.
void require_tp_divides_seq_len(int slices, int64_t seq_len);

}  // namespace dtrain
