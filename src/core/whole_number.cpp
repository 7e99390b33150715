// Strict whole numbers (see whole_number.hpp).
#include "core/whole_number.hpp"

#include <charconv>

namespace dtrain {

std::optional<int64_t> parse_whole(const std::string& s, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v, 10);
  if (s.empty() || ec != std::errc() || p != end || v < lo || v > hi) return std::nullopt;
  return v;
}

}  // namespace dtrain
