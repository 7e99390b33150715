// A hash table from a pair of adjacent token ids to the merge that joins them (its rank and the
// merged token's id): byte-level BPE looks every adjacent pair up here, so it is open addressing
// over one flat array, keyed by the two ids packed into 64 bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain {

struct PairMerge {
  uint32_t rank;       // lower merges first
  uint32_t merged_id;  // the token the pair becomes
};

class PairMergeTable {
 public:
  // Room for n merges without growing.
  void reserve(size_t n);
  // Sets the merge of (left, right), replacing one set before.
  void set(uint32_t left, uint32_t right, PairMerge merge);
  // The merge of (left, right); nullptr when the pair does not merge.
  const PairMerge* find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.merge;
      if (slot.key == kEmptyKey) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t key;
    PairMerge merge;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t(0);  // the pair (2^32-1, 2^32-1): no token has that id
  static uint64_t pack(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }
  size_t slot_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity);

  std::vector<Slot> slots_;  // a power of two of them, at most half full
  size_t mask_ = 0;
  size_t count_ = 0;
  int shift_ = 64;  // 64 - log2(slots_.size())
};

}  // namespace dtrain
