// Json: a small JSON value (null, bool, number, string, array, insertion-ordered object) with a
// strict parser and compact/indented output; used for safetensors headers, metadata and JSONL logs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace dtrain {

class Json {
 public:
  enum class Type { null, boolean, number, string, array, object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;  // keys unique, insertion order kept

  Json() = default;                 // null
  Json(std::nullptr_t) {}           // null
  Json(bool b) : v_(b) {}
  template <class T>
    requires(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
  Json(T x) : v_(static_cast<double>(x)) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(std::string_view s) : v_(std::string(s)) {}
  Json(Array a) : v_(std::move(a)) {}
  Json(Object o);  // Error on duplicate keys

  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  // Strict RFC 8259 parse of one value (surrounding whitespace allowed). Throws Error naming the
  // line, column and byte offset of the first problem. Duplicate object keys are an error.
  static Json parse(std::string_view text);

  // indent < 0: compact (no spaces). indent >= 0: pretty, that many spaces per level.
  // Integral numbers with |x| <= 2^53 print without a decimal point; other finite numbers print
  // the shortest text that reads back to the same double; NaN and infinities print as null.
  std::string dump(int indent = -1) const;

  Type type() const { return static_cast<Type>(v_.index()); }
  const char* type_name() const;  // "null", "bool", "number", "string", "array", "object"
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_number() const { return type() == Type::number; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  // Typed access; Error ("expected a string, found a number") on the wrong type.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int64() const;  // also Error unless the number is integral and |x| <= 2^53
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& items() const;  // object members in insertion order
  Object& items();

  // Objects. Non-const operator[] turns a null into an object and inserts null for a new key.
  Json& operator[](std::string_view key);
  const Json& operator[](std::string_view key) const { return at(key); }
  const Json& at(std::string_view key) const;  // Error naming the key if missing
  Json& at(std::string_view key);
  bool contains(std::string_view key) const;  // false for non-objects
  const Json* find(std::string_view key) const;  // nullptr if missing or not an object

  // Arrays. push_back turns a null into an array.
  Json& operator[](size_t i) { return at(i); }
  const Json& operator[](size_t i) const { return at(i); }
  const Json& at(size_t i) const;  // Error if out of range
  Json& at(size_t i);
  void push_back(Json v);

  size_t size() const;  // array/object: element count; string: bytes; null: 0; else 1

  // Deep equality; objects compare as key sets (order ignored), numbers as doubles.
  friend bool operator==(const Json& a, const Json& b);

 private:
  void dump_to(std::string& out, int indent, int depth) const;
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v_{nullptr};
};

}  // namespace dtrain
