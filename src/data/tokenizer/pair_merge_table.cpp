// PairMergeTable's insertion and growth (the lookup is inline in pair_merge_table.hpp).
#include "data/tokenizer/pair_merge_table.hpp"

#include "core/error.hpp"

namespace dtrain {

void PairMergeTable::set(uint32_t left, uint32_t right, PairMerge merge) {
  DT_ASSERT(pack(left, right) != kEmptyKey);
  if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 1024 : 2 * slots_.size());
  const uint64_t key = pack(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) {
      slot.merge = merge;
      return;
    }
    if (slot.key == kEmptyKey) {
      slot = {key, merge};
      ++count_;
      return;
    }
  }
}

void PairMergeTable::reserve(size_t n) {
  size_t capacity = 1024;
  while (capacity < 2 * n) capacity *= 2;
  if (capacity > slots_.size()) rehash(capacity);
}

void PairMergeTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmptyKey, {0, 0}});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  count_ = 0;
  for (const Slot& slot : old)
    if (slot.key != kEmptyKey) set(uint32_t(slot.key >> 32), uint32_t(slot.key), slot.merge);
}

}  // namespace dtrain
