// Config key parsers and descriptions (see config_keys.hpp).
#include "core/config_keys.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace dtrain {

namespace {
std::string where(const std::string& key, const std::string& value, const std::string& origin) {
  return key + " = " + value + " (" + origin + ")";
}
}  // namespace

std::string config_range(int64_t lo, int64_t hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

// A whole number within [lo, hi]: no value is cut to fit a narrower field later.
int64_t parse_config_int(const std::string& k, const std::string& v, const std::string& o, int64_t lo, int64_t hi,
                         const std::string& help) {
  int64_t x = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  require(!(r.ec == std::errc::result_out_of_range),
          where(k, v, o) + " is outside " + config_range(lo, hi) + " (" + help + "): give a value within");
  require(r.ec == std::errc() && r.ptr == v.data() + v.size(),
          where(k, v, o) + " is not an integer: give a whole number in " + config_range(lo, hi));
  require(x >= lo && x <= hi, where(k, v, o) + " is outside " + config_range(lo, hi) + " (" + help + "): give a value within");
  return x;
}

double parse_config_float(const std::string& k, const std::string& v, const std::string& o) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  require(!v.empty() && end == v.c_str() + v.size() && std::isfinite(x),
          where(k, v, o) + " is not a number: give a decimal number (such as 2.5 or 1e-3)");
  return x;
}

bool parse_config_bool(const std::string& k, const std::string& v, const std::string& o) {
  require(v == "true" || v == "false", where(k, v, o) + " is not a boolean: use true or false");
  return v == "true";
}

std::string parse_config_choice(const std::string& k, const std::string& v, const std::string& o,
                                const std::string& choices) {
  std::string c = "|" + choices + "|";
  require(c.find("|" + v + "|") != std::string::npos, where(k, v, o) + " is not allowed: use one of " + choices);
  return v;
}

std::string describe_config_key(const std::string& name, const Json& d, const std::string& type, int64_t lo, int64_t hi,
                                const std::string& help) {
  const std::string value = d.is_string() ? "\"" + d.get<std::string>() + "\"" : d.dump();
  const std::string t = type == "int" ? type + " " + config_range(lo, hi) : type;
  char line[200];
  std::snprintf(line, sizeof line, "%-34s %-12s %s\n", name.c_str(), value.c_str(), t.c_str());
  return line + ("    " + help + "\n");
}

void require_config_range(const std::string& k, int64_t v, int64_t lo, int64_t hi, const std::string& help) {
  require(v >= lo && v <= hi,
          k + " = " + std::to_string(v) + " is outside " + config_range(lo, hi) + " (" + help + "): give a value within");
}

std::string json_config_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();  // true/false dump as the text set() takes
}

}  // namespace dtrain
