// Shell quoting (see shell_word.hpp).
#include "core/shell_word.hpp"

namespace dtrain {

std::string shell_word(const std::string& s) {
  static const char* plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/=:+@%";
  if (!s.empty() && s.find_first_not_of(plain) == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& w : words) line += (line.empty() ? "" : " ") + shell_word(w);
  return line;
}

}  // namespace dtrain
