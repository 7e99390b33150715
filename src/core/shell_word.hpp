// Words and command lines as a POSIX shell reads them back: what dtrun's debug lines show and what
// a sweep writes into its job script and prints.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// `word` as it is when plain (letters, digits, _-.,/=:+@%), else in single quotes.
std::string shell_word(const std::string& word);
// The words joined by spaces, each as shell_word writes it.
std::string shell_line(const std::vector<std::string>& words);

}  // namespace dtrain
