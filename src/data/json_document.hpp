// A JSONL corpus line read as a document: the string value of its text key, or one error line naming
// the file, the line number and the fix.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace dtrain {

// Parses `line` (line `line_no` of `path`) and calls fn with the string value of `key`. Error when
// the line is not a JSON object, lacks the key, or the value is not a string.
void with_json_document(std::string_view line, const std::string& key, const std::string& path, int64_t line_no,
                        const std::function<void(std::string_view)>& fn);

}  // namespace dtrain
