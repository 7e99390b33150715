// The configuration and data compared across the ranks (see rank_agreement.hpp): one small gather of
// digests; the full texts travel only when they differ, to name the keys.
#include "train/rank_agreement.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "core/crc32c.hpp"
#include "core/error.hpp"
#include "core/host_name.hpp"

namespace dtrain {

namespace {

constexpr size_t kListed = 3;  // ranks and keys named in the error

// A value as a person reads it: 0.001 rather than the float's 0.0010000000474974513.
std::string text_of(const Json& value) {
  if (!value.is_number_float()) return value.dump();
  const double v = value.get<double>();
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  for (int digits = 1; digits < 17; ++digits) {  // the fewest digits that read back as the same value
    char s[32];
    std::snprintf(s, sizeof s, "%.*g", digits, v);
    const double back = std::strtod(s, nullptr);
    if (back == v || (double(float(v)) == v && float(back) == float(v))) return s;  // a float key's value
  }
  return b;
}

// "section.key=value" lines, sorted, of every key a rank may not set for itself; then the data.
std::map<std::string, std::string> run_lines(const Json& config, const std::string& data_fingerprint) {
  std::map<std::string, std::string> lines;
  for (const auto& [section, keys] : config.items())
    for (const auto& [name, value] : keys.items())
      if (const std::string key = section + "." + name; !rank_may_differ(key)) lines[key] = text_of(value);
  lines["(data)"] = data_fingerprint;
  return lines;
}

std::string joined(const std::map<std::string, std::string>& lines) {
  std::string text;
  for (const auto& [k, v] : lines) text += k + "=" + v + "\n";
  return text;
}

std::map<std::string, std::string> parsed(const std::string& text) {
  std::map<std::string, std::string> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) lines[line.substr(0, eq)] = line.substr(eq + 1);
    at = end + 1;
  }
  return lines;
}

// "train.lr (0.001 there, 0.002 on rank 0), train.seed (…)": the first keys where `other` differs.
std::string differing_keys(const std::map<std::string, std::string>& base, const std::map<std::string, std::string>& other,
                           const std::string& other_at = "there", const std::string& base_at = "on rank 0") {
  std::vector<std::string> diffs;
  std::map<std::string, std::string> all = base;
  all.insert(other.begin(), other.end());
  for (const auto& [key, unused] : all) {
    const auto a = base.find(key), b = other.find(key);
    const std::string va = a == base.end() ? "unset" : a->second, vb = b == other.end() ? "unset" : b->second;
    if (va != vb) diffs.push_back(key + " (" + vb + " " + other_at + ", " + va + " " + base_at + ")");
  }
  std::string out;
  for (size_t i = 0; i < std::min(diffs.size(), kListed); ++i) out += (i ? ", " : "") + diffs[i];
  if (diffs.size() > kListed) out += " and " + std::to_string(diffs.size() - kListed) + " more";
  return out;
}

}  // namespace

std::string config_differences(const Json& here, const Json& there, const std::function<bool(const std::string&)>& skip) {
  auto lines_of = [&](const Json& config) {
    std::map<std::string, std::string> lines = run_lines(config, "");
    for (auto it = lines.begin(); it != lines.end();) it = skip(it->first) ? lines.erase(it) : std::next(it);
    return lines;
  };
  const auto a = lines_of(here), b = lines_of(there);
  return a == b ? "" : differing_keys(a, b, "there", "here");
}

bool rank_may_differ(const std::string& key) {
  return key == "data.dir" || key == "data.stage" || key == "train.threads" || key == "train.progress";
}

void require_same_run_on_every_rank(World& world, const Json& config, const std::string& data_fingerprint) {
  if (world.size() == 1) return;
  const std::string text = joined(run_lines(config, data_fingerprint));
  const std::string digest = std::to_string(crc32c(text.data(), text.size())) + " " + std::to_string(text.size());
  const std::vector<std::string> digests = world.allgather_text(digest + " " + host_name(), 128);
  auto digest_of = [](const std::string& d) { return d.substr(0, d.rfind(' ')); };
  const std::string first = digest_of(digests[0]);
  if (std::all_of(digests.begin(), digests.end(), [&](const std::string& d) { return digest_of(d) == first; })) return;
  size_t longest = 0;
  for (const std::string& d : digests) longest = std::max<size_t>(longest, std::stoull(d.substr(d.find(' ') + 1)));
  const std::vector<std::string> texts = world.allgather_text(text, longest + 1);  // every rank sees every text
  const auto base = parsed(texts[0]);
  std::vector<std::string> named;
  int differing = 0;
  for (size_t r = 1; r < texts.size(); ++r) {
    if (texts[r] == texts[0]) continue;
    if (++differing > int(kListed)) continue;
    const std::string host = digests[r].substr(digests[r].rfind(' ') + 1);
    named.push_back("rank " + std::to_string(r) + " on " + host + ": " + differing_keys(base, parsed(texts[r])));
  }
  std::string which;
  for (const std::string& n : named) which += (which.empty() ? "" : "; ") + n;
  if (differing > int(kListed)) which += "; and " + std::to_string(differing - int(kListed)) + " more ranks";
  const std::string host0 = digests[0].substr(digests[0].rfind(' ') + 1);
  throw ConfigError("the ranks of this job were started with different configurations or data (" + which +
                    "; rank 0 is on " + host0 + "): start every rank with the same config file, --set options and "
                    "prepared data");
}

}  // namespace dtrain
