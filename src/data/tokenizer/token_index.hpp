// Token spellings (byte strings) to ids: open addressing over one flat array, each key's 64-bit hash
// kept beside it so that a probe rarely compares bytes. The keys are views: their owner keeps the
// bytes alive and unmoved. BPE looks each piece up here; the loaders each token and each of its cuts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dtrain {

class TokenIndex {
 public:
  static constexpr int64_t kAbsent = -1;
  // Room for n keys without growing.
  void reserve(size_t n);
  // Adds key -> id, unless the key is there already: then returns the id it has (else `id`). Keys
  // are not empty.
  uint32_t insert(std::string_view key, uint32_t id);
  // The id of `key`, kAbsent when it has none.
  int64_t find(std::string_view key) const { return find(key, hash_of(key)); }
  // The same, given the key's hash_of.
  int64_t find(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return kAbsent;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.data) return kAbsent;
      if (s.hash == h && s.size == key.size() && std::string_view(s.data, s.size) == key) return s.id;
    }
  }
  // Starts loading the slot where a find of a key of hash h begins, so that the cache misses of
  // several lookups overlap.
  void prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & mask_]);
  }
  size_t size() const { return count_; }
  static uint64_t hash_of(std::string_view key);

 private:
  struct Slot {
    uint64_t hash = 0;
    const char* data = nullptr;  // nullptr: empty
    uint32_t size = 0;
    uint32_t id = 0;
  };
  void rehash(size_t capacity);

  std::vector<Slot> slots_;  // a power of two of them, at most half full
  size_t mask_ = 0;
  size_t count_ = 0;
};

}  // namespace dtrain
