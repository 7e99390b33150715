// Small text helpers shared by the data layer: line reading and blank-line tests.
#pragma once
#include <functional>
#include <string>
#include <string_view>

namespace dtrain::data_io {

// Calls fn(line) for every line of `path` (without the newline, trailing '\r' removed).
// Throws Error naming the file when it cannot be opened or read.
void for_each_line(const std::string& path, const std::function<void(std::string_view)>& fn);

// True when the line holds only ASCII whitespace.
bool is_blank(std::string_view line);

}  // namespace dtrain::data_io
