// JSONL lines to document text (see json_document.hpp).
#include "data/json_document.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace dtrain {

namespace {

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: WHAT" as "byte 5: WHAT".
std::string parse_problem(const nlohmann::json::parse_error& e) {
  const std::string what = e.what();
  const size_t column = what.find("column ");
  const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
  const std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
  return "at byte " + std::to_string(e.byte) + ": " + detail;
}

std::string type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "a string";
}

}  // namespace

void with_json_document(std::string_view line, const std::string& key, const std::string& path, int64_t line_no,
                        const std::function<void(std::string_view)>& fn) {
  const std::string where = "line " + std::to_string(line_no) + " of " + path;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(where + " is not JSON (" + parse_problem(e) + "): fix that line or leave it out");
  }
  require(j.is_object(), where + " is " + type_name(j) + ", not a JSON object: give one object per line, its text "
                                 "under the key --text-key names (\"" + key + "\")");
  const auto it = j.find(key);
  require(it != j.end(), where + " has no \"" + key + "\" key: name the key that holds the text with --text-key");
  require(it->is_string(), where + ": \"" + key + "\" holds " + type_name(*it) +
                               ", not a string: give the document's text as a JSON string, or name another key "
                               "with --text-key");
  fn(it->get_ref<const std::string&>());
}

}  // namespace dtrain
