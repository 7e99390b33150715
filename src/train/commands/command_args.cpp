// CommandArgs (see command_args.hpp).
#include "train/commands/command_args.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace dtrain {

int64_t CommandArgs::integer(const std::string& k, int64_t def, int64_t lo, int64_t hi) const {
  std::string v = get(k);
  if (v.empty()) return def;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  require(*end == 0 && errno == 0, "--" + k + " " + v + " is not a whole number: give one from " + std::to_string(lo) +
                                       " to " + std::to_string(hi));
  require(x >= lo && x <= hi,
          "--" + k + " " + v + " is outside " + std::to_string(lo) + ".." + std::to_string(hi) + ": give one within");
  return x;
}
double CommandArgs::number(const std::string& k, double def) const {
  std::string v = get(k);
  if (v.empty()) return def;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  require(*end == 0 && std::isfinite(x), "--" + k + " " + v + " is not a number");
  return x;
}

CommandArgs parse_command_args(int argc, char** argv, int first, const std::vector<std::string>& flag_names,
                               const std::vector<std::string>& option_names) {
  CommandArgs a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    auto eq = name.find('=');
    if (eq != std::string::npos && name != "set") {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      a.opts.emplace(name, value);
      continue;
    }
    if (std::find(flag_names.begin(), flag_names.end(), name) != flag_names.end()) {
      a.flags.push_back(name);
      continue;
    }
    require(std::find(option_names.begin(), option_names.end(), name) != option_names.end(),
            "unknown option --" + name + ": see `dtrain --help`");
    require(i + 1 < argc, "option --" + name + " needs a value: see `dtrain --help`");
    a.opts.emplace(name, argv[++i]);
  }
  return a;
}

void apply_sets(RunConfig& cfg, const CommandArgs& a) {
  auto [lo, hi] = a.opts.equal_range("set");
  for (auto it = lo; it != hi; ++it) {
    auto eq = it->second.find('=');
    require(eq != std::string::npos, "--set " + it->second + " is not key=value: write e.g. --set train.lr=0.001");
    cfg.set(it->second.substr(0, eq), it->second.substr(eq + 1));
  }
}

}  // namespace dtrain
