// A dtrain command's arguments as given: `--name value` options (--set may repeat), flags without a
// value, positional words; and the checks that read an option as a number.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "nn/context.hpp"
#include "train/config.hpp"

namespace dtrain {

// Largest count an option takes (a vocabulary, a batch, a thread count): far past any real one.
constexpr int64_t kMaxCount = int64_t(1) << 31;

// Options: --name value pairs (repeatable --set), flags without value.
struct CommandArgs {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> opts;
  std::vector<std::string> flags;

  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = opts.find(k);
    return it == opts.end() ? def : it->second;
  }
  std::string need(const std::string& k) const {
    auto it = opts.find(k);
    require(it != opts.end(), "missing --" + k + ": see `dtrain --help`");
    return it->second;
  }
  bool flag(const std::string& f) const { return std::find(flags.begin(), flags.end(), f) != flags.end(); }
  // --k as a whole number within [lo, hi] (def when absent); one line naming the option otherwise.
  int64_t integer(const std::string& k, int64_t def, int64_t lo, int64_t hi) const;
  double number(const std::string& k, double def) const;
  // --precision f32|bf16 (f32 when absent)
  Precision precision() const { return parse_precision(get("precision", "f32"), "--precision"); }
};

// argv[first..] read: a --name value (or --name=value) of `option_names`, a --flag of `flag_names`,
// or a positional word; Error naming an unknown option or a missing value.
CommandArgs parse_command_args(int argc, char** argv, int first, const std::vector<std::string>& flag_names,
                               const std::vector<std::string>& option_names);
// Every --set key=value into cfg.
void apply_sets(RunConfig& cfg, const CommandArgs& a);

}  // namespace dtrain
