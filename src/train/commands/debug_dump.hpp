// `dtrain debug dump`: writes initial weights, batches, and dtrain's logits, loss, gradients and a
// short AdamW loss trajectory, for tests/python/parity.py to compare with PyTorch.
#pragma once
#include <cstdint>
#include <string>

#include "train/config.hpp"

namespace dtrain {

void dump_parity(const RunConfig& cfg, const std::string& out_dir, int64_t steps);

}  // namespace dtrain
