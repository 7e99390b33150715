// Json: nlohmann's ordered_json (objects keep insertion order) under dtrain's name, a parser that
// turns bad text into one dtrain::Error line naming where it came from, and typed reads for files.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dtrain {

// Integers print without a decimal point; doubles print the shortest text that reads back to the
// same value (2.0 as "2.0"); NaN and infinities print as null. dump() needs UTF-8 strings.
using Json = nlohmann::ordered_json;

// Parses one JSON value. Bad text throws Error("invalid JSON in SOURCE at line L, column C
// (byte B): WHAT; fix the JSON text"); `source` is a path or a description such as "the
// dtrain.model metadata of X/model.safetensors". Duplicate object keys and nesting deeper than
// 512 levels are errors too (nlohmann alone would keep the last duplicate).
Json parse_json(std::string_view text, const std::string& source);

// The member `key` of j (nested names joined by '.', e.g. "config.data.dir"), j having been read
// from `source`. Error naming source and key when it is missing or a level is not an object.
const Json& json_at(const Json& j, std::string_view key, const std::string& source);

// json_at as T: int64_t (an integer), double (any number), bool or std::string. Error naming
// source and key when the value has another type.
template <class T>
T json_get(const Json& j, std::string_view key, const std::string& source);
extern template int64_t json_get<int64_t>(const Json&, std::string_view, const std::string&);
extern template double json_get<double>(const Json&, std::string_view, const std::string&);
extern template bool json_get<bool>(const Json&, std::string_view, const std::string&);
extern template std::string json_get<std::string>(const Json&, std::string_view, const std::string&);

}  // namespace dtrain
