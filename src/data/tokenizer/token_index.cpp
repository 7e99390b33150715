// TokenIndex (see token_index.hpp): its hash, insertion and growth.
#include "data/tokenizer/token_index.hpp"

#include <cstring>

#include "core/error.hpp"

namespace dtrain {

namespace {

uint64_t mix_bits(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return x;
}

}  // namespace

uint64_t TokenIndex::hash_of(std::string_view key) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ key.size();
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, key.data() + i, 8);
    h = mix_bits(h ^ word) * 0x9E3779B97F4A7C15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, key.data() + i, key.size() - i);
  return mix_bits(h ^ tail ^ (uint64_t(key.size() - i) << 59));
}

void TokenIndex::reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  if (capacity > slots_.size()) rehash(capacity);
}

uint32_t TokenIndex::insert(std::string_view key, uint32_t id) {
  DT_ASSERT(!key.empty());
  if (2 * (count_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
  const uint64_t h = hash_of(key);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (!s.data) {
      s = {h, key.data(), uint32_t(key.size()), id};
      ++count_;
      return id;
    }
    if (s.hash == h && s.size == key.size() && std::string_view(s.data, s.size) == key) return s.id;
  }
}

void TokenIndex::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  for (const Slot& s : old) {
    if (!s.data) continue;
    size_t i = s.hash & mask_;
    while (slots_[i].data) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

}  // namespace dtrain
