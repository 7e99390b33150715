// A sweep's grid read, expanded and named (see sweep_grid.hpp).
#include "train/commands/sweep_grid.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "core/error.hpp"

namespace dtrain {

namespace {

constexpr size_t kMaxNameBytes = 200;  // file systems take 255 bytes per name; room for suffixes

// The entry's values split at commas; Error naming the entry when one of them is empty.
std::vector<std::string> split_values(const std::string& entry, const std::string& list) {
  const std::string fix = ": give one or more values separated by commas, e.g. --grid \"train.lr=1e-3,3e-3\"";
  require(!list.empty(), "--grid entry `" + entry + "` has no value" + fix);
  std::vector<std::string> values;
  size_t at = 0;
  while (true) {
    const size_t comma = list.find(',', at);
    const std::string value = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    require(!value.empty(), "--grid entry `" + entry + "` has an empty value" + fix);
    values.push_back(value);
    if (comma == std::string::npos) return values;
    at = comma + 1;
  }
}

}  // namespace

std::vector<GridAxis> parse_grid(const std::string& text) {
  std::vector<GridAxis> axes;
  std::istringstream words(text);
  std::string entry;
  while (words >> entry) {
    const size_t eq = entry.find('=');
    require(eq != std::string::npos && eq > 0, "--grid entry `" + entry + "` is not key=v1,v2,…: write e.g. --grid "
                                               "\"train.lr=1e-3,3e-3 model.dim=128,256\"");
    GridAxis axis{entry.substr(0, eq), split_values(entry, entry.substr(eq + 1))};
    for (const GridAxis& a : axes)
      require(a.key != axis.key, "--grid names " + axis.key + " twice: give each key once, with all its values "
                                 "(e.g. " + axis.key + "=a,b)");
    axes.push_back(std::move(axis));
  }
  require(!axes.empty(), "--grid \"" + text + "\" names no key: write e.g. --grid \"train.lr=1e-3,3e-3\"");
  return axes;
}

std::vector<std::string> axis_labels(const std::vector<GridAxis>& axes) {
  auto last = [](const std::string& key) { return key.substr(key.rfind('.') + 1); };
  std::map<std::string, int> uses;
  for (const GridAxis& a : axes) ++uses[last(a.key)];
  std::vector<std::string> labels;
  for (const GridAxis& a : axes) labels.push_back(uses[last(a.key)] > 1 || last(a.key).empty() ? a.key : last(a.key));
  return labels;
}

std::string point_name(const std::vector<std::string>& labels, const std::vector<std::string>& values) {
  std::string name;
  for (size_t i = 0; i < labels.size(); ++i) name += (i ? "," : "") + labels[i] + "=" + values[i];
  for (char& c : name)
    if (c == '/' || c == '\\' || std::isspace(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) < 32)
      c = '_';
  return name;
}

std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes) {
  const std::vector<std::string> labels = axis_labels(axes);
  size_t count = 1;
  for (const GridAxis& a : axes) {
    require(count <= 100000 / a.values.size(), "--grid makes more than 100000 points: sweep fewer values at once");
    count *= a.values.size();
  }
  std::vector<GridPoint> points;
  std::map<std::string, size_t> named;  // name -> point index
  for (size_t n = 0; n < count; ++n) {
    GridPoint p;
    std::vector<std::string> values(axes.size());
    size_t rest = n;
    for (size_t i = axes.size(); i-- > 0;) {  // the last axis varies fastest
      values[i] = axes[i].values[rest % axes[i].values.size()];
      rest /= axes[i].values.size();
    }
    for (size_t i = 0; i < axes.size(); ++i) p.values.emplace_back(axes[i].key, values[i]);
    p.name = point_name(labels, values);
    require(p.name.size() <= kMaxNameBytes, "--grid point `" + p.name + "` makes a run dir name longer than " +
                                                std::to_string(kMaxNameBytes) + " bytes: sweep shorter values");
    const auto [it, fresh] = named.emplace(p.name, n);
    require(fresh, "--grid points " + std::to_string(it->second + 1) + " and " + std::to_string(n + 1) +
                       " would share the run dir name `" + p.name + "` ('/' and white space become '_'): give values "
                       "that differ otherwise");
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace dtrain
