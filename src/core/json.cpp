// JSON parsing through nlohmann with dtrain's error lines, and typed reads (see json.hpp).
#include "core/json.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <unordered_set>
#include <vector>

#include "core/error.hpp"

namespace dtrain {

namespace {

constexpr int kMaxDepth = 512;

// A char iterator that records how far the parser has read, so that errors found in the parser
// callback (to which nlohmann passes no position) can still name one.
struct TrackedIter {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* p = nullptr;
  const char** read_to = nullptr;

  reference operator*() const { return *p; }
  TrackedIter& operator++() {
    *read_to = ++p;
    return *this;
  }
  TrackedIter operator++(int) {
    TrackedIter old = *this;
    ++*this;
    return old;
  }
  bool operator==(const TrackedIter& o) const { return p == o.p; }
};

[[noreturn]] void fail_at(std::string_view text, size_t at, const std::string& source,
                          const std::string& what) {
  at = std::min(at, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  throw Error("invalid JSON in " + source + " at line " + std::to_string(line) + ", column " +
              std::to_string(col) + " (byte " + std::to_string(at) + "): " + what +
              "; fix the JSON text");
}

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 2: " prefix (we name the position ourselves), cut short if it quotes a long token, and
// with bytes outside printable ASCII in the quoted text written as \xNN.
std::string detail_of(const Json::exception& e) {
  std::string w = e.what();
  size_t p = w.find("] ");
  if (p != std::string::npos && w.compare(p + 2, 11, "parse error") == 0) p = w.find(": ", p);
  if (p != std::string::npos) w.erase(0, p + 2);
  if (w.size() > 200) w = w.substr(0, 200) + "...";
  std::string out;
  for (char c : w) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      const char* hex = "0123456789abcdef";
      out += {'\\', 'x', hex[u >> 4], hex[u & 15]};
    }
  }
  return out;
}

// "a string", "an object", ... for error lines.
std::string a_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    default: return v.type_name();
  }
}

}  // namespace

Json parse_json(std::string_view text, const std::string& source) {
  const char* begin = text.data();
  const char* read_to = begin;
  auto read_bytes = [&] { return size_t(read_to - begin); };
  std::vector<std::unordered_set<std::string>> keys;  // one set per object being parsed
  auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxDepth)  // the bracket is the last byte read
          fail_at(text, read_bytes() - 1, source,
                  "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string& k = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(k).second) {
          // The key's closing quote is the last byte read; name its opening quote, the nearest
          // '"' before it that is not escaped.
          size_t at = read_bytes() - 1;
          while (at > 0) {
            --at;
            size_t backslashes = 0;
            while (backslashes < at && text[at - backslashes - 1] == '\\') ++backslashes;
            if (text[at] == '"' && backslashes % 2 == 0) break;
          }
          fail_at(text, at, source, "duplicate key " + Json(k).dump());
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(TrackedIter{begin, &read_to}, TrackedIter{begin + text.size(), &read_to},
                       check);
  } catch (const Json::parse_error& e) {
    fail_at(text, e.byte == 0 ? 0 : e.byte - 1, source, detail_of(e));  // e.byte counts from 1
  } catch (const Json::exception& e) {  // e.g. "number overflow parsing '1e999'"
    fail_at(text, read_bytes() == 0 ? 0 : read_bytes() - 1, source, detail_of(e));
  }
}

const Json& json_at(const Json& j, std::string_view key, const std::string& source) {
  const Json* cur = &j;
  size_t pos = 0;
  while (true) {
    const size_t dot = std::min(key.find('.', pos), key.size());
    const std::string walked(key.substr(0, pos == 0 ? 0 : pos - 1));
    require(cur->is_object(), source + ": " + (walked.empty() ? "the top level" : "\"" + walked + "\"") +
                                  " is " + a_type(*cur) + ", expected an object; fix the JSON text");
    auto it = cur->find(std::string(key.substr(pos, dot - pos)));
    require(it != cur->end(), source + " has no key \"" + std::string(key.substr(0, dot)) +
                                  "\"; fix the JSON text");
    cur = &*it;
    if (dot == key.size()) return *cur;
    pos = dot + 1;
  }
}

template <class T>
T json_get(const Json& j, std::string_view key, const std::string& source) {
  const Json& v = json_at(j, key, source);
  const char* wanted = nullptr;
  if constexpr (std::is_same_v<T, int64_t>) {
    if (v.is_number_integer() &&
        (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max())))
      return v.get<int64_t>();
    wanted = "a 64-bit integer";
  } else if constexpr (std::is_same_v<T, double>) {
    if (v.is_number()) return v.get<double>();
    wanted = "a number";
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
    wanted = "true or false";
  } else {
    static_assert(std::is_same_v<T, std::string>, "json_get reads int64_t, double, bool or std::string");
    if (v.is_string()) return v.get<std::string>();
    wanted = "a string";
  }
  throw Error(source + ": \"" + std::string(key) + "\" is " +
              (v.is_number() ? "the number " + v.dump() : a_type(v)) + ", expected " + wanted +
              "; fix the JSON text");
}

template int64_t json_get<int64_t>(const Json&, std::string_view, const std::string&);
template double json_get<double>(const Json&, std::string_view, const std::string&);
template bool json_get<bool>(const Json&, std::string_view, const std::string&);
template std::string json_get<std::string>(const Json&, std::string_view, const std::string&);

}  // namespace dtrain
