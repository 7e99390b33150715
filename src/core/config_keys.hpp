// Config keys as tables: each key's type, range, one line of meaning, and how it is set from text
// and read back as JSON. The run's config (train/config) and every model kind's keys
// (src/models/<kind>/config) are tables of this shape, so they parse, check and describe alike.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/json.hpp"

namespace dtrain {

template <class Config>
struct ConfigKey {
  std::string type;        // int, float, bool, string or a choice list "a|b"
  std::string help;        // one line: what it means
  int64_t lo = 0, hi = 0;  // int keys: the values allowed (checked where they are parsed and again in validation)
  std::function<void(Config&, const std::string&)> set;  // Errors say "(--set)"; callers put the origin there
  std::function<Json(const Config&)> get;
};
template <class Config>
using ConfigKeyTable = std::map<std::string, ConfigKey<Config>>;

std::string config_range(int64_t lo, int64_t hi);  // "lo..hi"
// Parsers for a key's text value; Errors name the key, the value, where it came from and the fix.
int64_t parse_config_int(const std::string& key, const std::string& value, const std::string& origin, int64_t lo,
                         int64_t hi, const std::string& help);
double parse_config_float(const std::string& key, const std::string& value, const std::string& origin);
bool parse_config_bool(const std::string& key, const std::string& value, const std::string& origin);
std::string parse_config_choice(const std::string& key, const std::string& value, const std::string& origin,
                                const std::string& choices);
// One key's line for `dtrain config keys`: name, default, type (an int's range), then its meaning.
std::string describe_config_key(const std::string& name, const Json& default_value, const std::string& type,
                                int64_t lo, int64_t hi, const std::string& help);
// An int key's value outside its range, named with the fix (values set in code are checked so).
void require_config_range(const std::string& key, int64_t value, int64_t lo, int64_t hi, const std::string& help);
// A JSON config value as the text a key's set takes: a string's content, else its JSON text.
std::string json_config_text(const Json& v);

// Table entries for a field of Config (its member path `field`, e.g. model.dim).
#define DT_INT_KEY(name, field, lo, hi, help)                                                                   \
  {name,                                                                                                        \
   {"int", help, lo, hi,                                                                                        \
    [](auto& c, const std::string& v) { c.field = decltype(c.field)(parse_config_int(name, v, "--set", lo, hi, help)); }, \
    [](const auto& c) { return Json(c.field); }}}
#define DT_FLOAT_KEY(name, field, help)                                                                          \
  {name, {"float", help, 0, 0, [](auto& c, const std::string& v) { c.field = float(parse_config_float(name, v, "--set")); }, \
          [](const auto& c) { return Json(c.field); }}}
#define DT_BOOL_KEY(name, field, help)                                                                           \
  {name, {"bool", help, 0, 0, [](auto& c, const std::string& v) { c.field = parse_config_bool(name, v, "--set"); }, \
          [](const auto& c) { return Json(c.field); }}}
#define DT_STRING_KEY(name, field, help)                                                        \
  {name, {"string", help, 0, 0, [](auto& c, const std::string& v) { c.field = v; }, \
          [](const auto& c) { return Json(c.field); }}}
#define DT_CHOICE_KEY(name, field, choices, help)                                                               \
  {name, {choices, help, 0, 0,                                                                                 \
          [](auto& c, const std::string& v) { c.field = parse_config_choice(name, v, "--set", choices); },   \
          [](const auto& c) { return Json(c.field); }}}

}  // namespace dtrain
