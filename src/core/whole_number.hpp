// Strict whole numbers from command lines and environment variables: digits only (and a leading
// '-'), nothing before or after, within a range the caller names in its message.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

// The value of `s` when it is a whole number from lo to hi (inclusive), else nullopt: "", " 5",
// "5x", "+5", "0x10" and values that overflow are not.
std::optional<int64_t> parse_whole(const std::string& s, int64_t lo, int64_t hi);

}  // namespace dtrain
