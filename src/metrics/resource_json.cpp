// Resource records and their maxima as JSON (see resource_json.hpp).
#include "metrics/resource_json.hpp"

#include <cmath>
#include <iterator>
#include <stdexcept>
#include <type_traits>

namespace dtrain {

namespace {

// The figures of a sample in record order: name, how to read it, decimals kept in JSON (-1: an integer).
struct Figure {
  const char* name;
  std::optional<double> (*get)(const ResourceSample&);
  int decimals;
};
const Figure kFigures[] = {
    {"cpu_percent", [](const ResourceSample& s) { return s.cpu_percent; }, 1},
    {"rss_mb", [](const ResourceSample& s) { return s.rss_mb; }, 1},
    {"threads", [](const ResourceSample& s) { return s.threads ? std::optional<double>(*s.threads) : std::nullopt; },
     -1},
    {"read_mb", [](const ResourceSample& s) { return s.read_mb; }, 2},
    {"write_mb", [](const ResourceSample& s) { return s.write_mb; }, 2},
    {"gpu_util_percent", [](const ResourceSample& s) { return s.gpu_util_percent; }, 1},
    {"gpu_mem_mb", [](const ResourceSample& s) { return s.gpu_mem_mb; }, 1},
};
constexpr size_t kCount = std::size(kFigures);

Json rounded(double v, int decimals) {
  if (decimals < 0) return int64_t(std::llround(v));
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

}  // namespace

Json to_json(const ResourceSample& s, const std::string& host) {
  Json j = Json::object();
  j["type"] = "resource";
  j["rank"] = s.rank;
  j["host"] = host;
  j["step"] = s.step;
  j["t"] = rounded(s.t, 3);
  for (const Figure& f : kFigures)
    if (const auto v = f.get(s)) j[f.name] = rounded(*v, f.decimals);
  return j;
}

std::vector<std::string> resource_figures() {
  std::vector<std::string> names;
  for (const Figure& f : kFigures) names.emplace_back(f.name);
  return names;
}

void ResourceMax::add(const ResourceSample& s) {
  static_assert(std::extent_v<decltype(peaks_)> == kCount);
  ++samples_;
  for (size_t i = 0; i < kCount; ++i) {
    const auto v = kFigures[i].get(s);
    if (v && (!peaks_[i] || *v > peaks_[i]->value)) peaks_[i] = ResourcePeak{*v, s.rank};
  }
}

std::optional<ResourcePeak> ResourceMax::peak(const std::string& figure) const {
  for (size_t i = 0; i < kCount; ++i)
    if (figure == kFigures[i].name) return peaks_[i];
  throw std::logic_error("internal error: no resource figure is called '" + figure + "'");
}

Json to_json(const ResourceMax& m) {
  Json max = Json::object();
  for (size_t i = 0; i < kCount; ++i)
    if (const auto& p = m.peaks_[i])
      max[kFigures[i].name] = Json{{"value", rounded(p->value, kFigures[i].decimals)}, {"rank", p->rank}};
  return Json{{"samples", m.samples_}, {"max", max}};
}

}  // namespace dtrain
