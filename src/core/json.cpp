// Json parser, printer and accessors (see json.hpp). The parser is strict RFC 8259 with a nesting
// limit, so garbage input gives an Error with a position instead of a crash.
#include "core/json.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <unordered_set>

#include "core/error.hpp"

namespace dtrain {

namespace {

constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53
constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error("invalid JSON at line " + std::to_string(line) + ", column " +
                std::to_string(col) + " (byte " + std::to_string(at) + "): " + what +
                "; fix the JSON text");
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  void skip_ws() {
    while (!at_end()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        ++pos_;
      else
        break;
    }
  }

  static std::string describe(char c) {
    if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
    return std::string("byte ") + buf;
  }

  void expect_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) fail("expected '" + std::string(w) + "'");
    pos_ += w.size();
  }

  Json parse_value(int depth) {
    if (at_end()) fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': expect_word("true"); return Json(true);
      case 'f': expect_word("false"); return Json(false);
      case 'n': expect_word("null"); return Json();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail("unexpected " + describe(c) + ", expected a value");
    }
  }

  Json parse_object(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    ++pos_;  // '{'
    Json::Object members;
    std::unordered_set<std::string> seen;
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skip_ws();
      if (peek() != '"') fail(at_end() ? "unexpected end of input inside an object"
                                       : "expected a string key, found " + describe(peek()));
      size_t key_pos = pos_;
      std::string key = parse_string();
      if (!seen.insert(key).second) fail_at(key_pos, "duplicate key \"" + key + "\"");
      skip_ws();
      if (peek() != ':') fail("expected ':' after key \"" + key + "\"");
      ++pos_;
      skip_ws();
      Json value = parse_value(depth);
      members.emplace_back(std::move(key), std::move(value));
      skip_ws();
      char c = peek();
      if (c == ',') {
        ++pos_;
        continue;
      }
      if (c == '}') {
        ++pos_;
        break;
      }
      fail(at_end() ? "unexpected end of input inside an object" : "expected ',' or '}'");
    }
    return Json(std::move(members));
  }

  Json parse_array(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    ++pos_;  // '['
    Json::Array elems;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Json(std::move(elems));
    }
    while (true) {
      skip_ws();
      elems.push_back(parse_value(depth));
      skip_ws();
      char c = peek();
      if (c == ',') {
        ++pos_;
        continue;
      }
      if (c == ']') {
        ++pos_;
        break;
      }
      fail(at_end() ? "unexpected end of input inside an array" : "expected ',' or ']'");
    }
    return Json(std::move(elems));
  }

  Json parse_number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      fail("expected a digit");
    }
    if (peek() == '.') {
      ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit after '.'");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') ++pos_;
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec == std::errc::result_out_of_range) {
      // Underflow (tiny magnitude) reads as zero; overflow is not representable.
      if (decimal_magnitude(s_.substr(start, pos_ - start)) > 0) {
        fail_at(start, "number out of range for a double");
      }
      d = 0;
    } else if (ec != std::errc() || ptr != s_.data() + pos_) {
      fail_at(start, "malformed number");
    }
    return Json(d);
  }

  // Rough base-10 exponent of an already validated number's magnitude (clamped), e.g. 12e3 -> 4.
  static long decimal_magnitude(std::string_view num) {
    size_t i = 0;
    if (num[i] == '-') ++i;
    long mag = 0;
    bool seen_nonzero = false;
    for (; i < num.size() && num[i] >= '0' && num[i] <= '9'; ++i) {
      if (num[i] != '0') seen_nonzero = true;
      if (seen_nonzero) ++mag;
    }
    if (i < num.size() && num[i] == '.') {
      for (++i; i < num.size() && num[i] >= '0' && num[i] <= '9'; ++i) {
        if (seen_nonzero) continue;
        if (num[i] != '0') seen_nonzero = true;
        else --mag;
      }
    }
    if (i < num.size() && (num[i] == 'e' || num[i] == 'E')) {
      ++i;
      bool neg = num[i] == '-';
      if (num[i] == '+' || num[i] == '-') ++i;
      long e = 0;
      for (; i < num.size(); ++i) e = std::min<long>(e * 10 + (num[i] - '0'), 1000000000L);
      mag += neg ? -e : e;
    }
    return mag;
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > s_.size()) fail("unexpected end of input in a \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= unsigned(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= unsigned(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= unsigned(c - 'A' + 10);
      else
        fail_at(pos_ - 1, "bad hex digit in a \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail_at(start, "unterminated string");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("control character " + describe(c) +
                                                     " inside a string (escape it)");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) fail_at(start, "unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          size_t esc = pos_ - 2;
          uint32_t cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(esc, "lone low surrogate in a \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") fail_at(esc, "high surrogate not followed by \\u");
            pos_ += 2;
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail_at(esc, "high surrogate not followed by a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail_at(pos_ - 2, "bad escape \\" + std::string(1, e));
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void dump_string(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void dump_number(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[64];
  if (d == std::floor(d) && std::fabs(d) <= kMaxExactInt && !(d == 0 && std::signbit(d))) {
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(d));
    out.append(buf, p);
    return;
  }
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
  out.append(buf, p);
}

void newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(size_t(indent) * size_t(depth), ' ');
}

}  // namespace

Json::Json(Object o) {
  std::unordered_set<std::string_view> seen;
  for (const auto& kv : o) {
    require(seen.insert(kv.first).second,
            "JSON object has the key \"" + kv.first + "\" twice; keys must be unique");
  }
  v_ = std::move(o);
}

Json Json::parse(std::string_view text) { return Parser(text).parse_document(); }

const char* Json::type_name() const {
  switch (type()) {
    case Type::null: return "null";
    case Type::boolean: return "bool";
    case Type::number: return "number";
    case Type::string: return "string";
    case Type::array: return "array";
    case Type::object: return "object";
  }
  return "?";
}

static void type_error(const Json& j, const char* wanted) {
  throw Error(std::string("JSON value has the wrong type: expected ") + wanted + ", found " +
              j.type_name() + "; fix the JSON input");
}

bool Json::as_bool() const {
  if (!is_bool()) type_error(*this, "a bool");
  return std::get<bool>(v_);
}

double Json::as_number() const {
  if (!is_number()) type_error(*this, "a number");
  return std::get<double>(v_);
}

int64_t Json::as_int64() const {
  double d = as_number();
  require(d == std::floor(d) && std::fabs(d) <= kMaxExactInt,
          "JSON number " + Json(d).dump() +
              " is not an integer (or exceeds 2^53); use a whole number");
  return static_cast<int64_t>(d);
}

const std::string& Json::as_string() const {
  if (!is_string()) type_error(*this, "a string");
  return std::get<std::string>(v_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) type_error(*this, "an array");
  return std::get<Array>(v_);
}

Json::Array& Json::as_array() {
  if (!is_array()) type_error(*this, "an array");
  return std::get<Array>(v_);
}

const Json::Object& Json::items() const {
  if (!is_object()) type_error(*this, "an object");
  return std::get<Object>(v_);
}

Json::Object& Json::items() {
  if (!is_object()) type_error(*this, "an object");
  return std::get<Object>(v_);
}

Json& Json::operator[](std::string_view key) {
  if (is_null()) v_ = Object{};
  Object& o = items();
  for (auto& kv : o) {
    if (kv.first == key) return kv.second;
  }
  o.emplace_back(std::string(key), Json());
  return o.back().second;
}

const Json* Json::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& kv : std::get<Object>(v_)) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  items();  // type check
  const Json* j = find(key);
  require(j != nullptr, "JSON object has no key \"" + std::string(key) + "\"; add it");
  return *j;
}

Json& Json::at(std::string_view key) { return const_cast<Json&>(std::as_const(*this).at(key)); }

bool Json::contains(std::string_view key) const { return find(key) != nullptr; }

const Json& Json::at(size_t i) const {
  const Array& a = as_array();
  require(i < a.size(), "JSON array index " + std::to_string(i) + " out of range (size " +
                            std::to_string(a.size()) + "); use a longer array");
  return a[i];
}

Json& Json::at(size_t i) { return const_cast<Json&>(std::as_const(*this).at(i)); }

void Json::push_back(Json v) {
  if (is_null()) v_ = Array{};
  as_array().push_back(std::move(v));
}

size_t Json::size() const {
  switch (type()) {
    case Type::null: return 0;
    case Type::string: return std::get<std::string>(v_).size();
    case Type::array: return std::get<Array>(v_).size();
    case Type::object: return std::get<Object>(v_).size();
    default: return 1;
  }
}

bool operator==(const Json& a, const Json& b) {
  if (a.type() != b.type()) return false;
  if (!a.is_object()) return a.v_ == b.v_;
  const auto& ao = std::get<Json::Object>(a.v_);
  const auto& bo = std::get<Json::Object>(b.v_);
  if (ao.size() != bo.size()) return false;
  for (const auto& kv : ao) {
    const Json* other = b.find(kv.first);
    if (!other || !(kv.second == *other)) return false;
  }
  return true;
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  switch (type()) {
    case Type::null: out += "null"; break;
    case Type::boolean: out += std::get<bool>(v_) ? "true" : "false"; break;
    case Type::number: dump_number(out, std::get<double>(v_)); break;
    case Type::string: dump_string(out, std::get<std::string>(v_)); break;
    case Type::array: {
      const Array& a = std::get<Array>(v_);
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        if (indent >= 0) newline(out, indent, depth + 1);
        a[i].dump_to(out, indent, depth + 1);
      }
      if (indent >= 0 && !a.empty()) newline(out, indent, depth);
      out += ']';
      break;
    }
    case Type::object: {
      const Object& o = std::get<Object>(v_);
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += ',';
        if (indent >= 0) newline(out, indent, depth + 1);
        dump_string(out, o[i].first);
        out += indent >= 0 ? ": " : ":";
        o[i].second.dump_to(out, indent, depth + 1);
      }
      if (indent >= 0 && !o.empty()) newline(out, indent, depth);
      out += '}';
      break;
    }
  }
}

}  // namespace dtrain
