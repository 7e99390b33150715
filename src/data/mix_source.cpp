// MixSource (see mix_source.hpp): the sources opened alone, their splits mixed or concatenated.
#include "data/mix_source.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "data/mix.hpp"

namespace dtrain {

std::vector<MixEntry> parse_mix(const std::string& text) {
  const std::string fix = ": write data.mix = [{dir = \"data/a\", weight = 0.7}, {dir = \"data/b\", weight = 0.3}]";
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  require(j.is_array(), "data.mix = " + text + " is not a list of sources" + fix);
  std::vector<MixEntry> out;
  double total = 0;
  for (const auto& e : j) {
    require(e.is_object() && e.contains("dir") && e["dir"].is_string() && e.contains("weight") &&
                e["weight"].is_number() && e.size() == 2,
            "data.mix entry " + e.dump() + " is not {dir = \"…\", weight = W}" + fix);
    MixEntry m{e["dir"].get<std::string>(), e["weight"].get<double>()};
    require(!m.dir.empty(), "data.mix: an entry has an empty dir" + fix);
    require(std::isfinite(m.weight) && m.weight >= 0,
            "data.mix: the weight of " + m.dir + " is " + e["weight"].dump() + ": weights are numbers ≥ 0");
    for (const MixEntry& before : out)
      require(before.dir != m.dir, "data.mix names " + m.dir + " twice: give each folder once, with its whole weight");
    total += m.weight;
    out.push_back(m);
  }
  require(out.empty() || total > 0, "data.mix: the weights sum to zero: give at least one source a weight > 0");
  require(out.size() < 256, "data.mix holds " + std::to_string(out.size()) + " sources: at most 255");
  std::erase_if(out, [](const MixEntry& m) { return m.weight == 0; });  // a source left out by its weight
  return out;
}

namespace {

// A dataset that owns what it is made of.
template <class Base>
class Owning : public Base {
 public:
  Owning(std::vector<std::unique_ptr<Dataset>> parts, auto&&... args)
      : Base(pointers(parts), std::forward<decltype(args)>(args)...), parts_(std::move(parts)) {}

 private:
  static std::vector<const Dataset*> pointers(const std::vector<std::unique_ptr<Dataset>>& parts) {
    std::vector<const Dataset*> p;
    for (const auto& d : parts) p.push_back(d.get());
    return p;
  }
  std::vector<std::unique_ptr<Dataset>> parts_;
};

class MixSource : public DataSource {
 public:
  MixSource(const std::vector<MixEntry>& entries, InputKind input) : entries_(entries) {
    require(input == InputKind::tokens, "data.mix mixes token data: the model reads images");
    for (const MixEntry& e : entries) sources_.push_back(DataSource::open(e.dir, input));
    const KeptFile first = sources_[0]->kept_file();
    const std::string first_bytes = read_file(first.path);
    for (size_t s = 1; s < sources_.size(); ++s) {
      const std::string why = sources_[s]->unlike_kept(first_bytes, first.path);
      require(why.empty(), "data.mix: " + entries[s].dir + " and " + entries[0].dir +
                               " were tokenized by different tokenizers: prepare every source of a mix with one tokenizer");
    }
  }
  const std::string& dir() const override { return sources_[0]->dir(); }
  DataFacts facts() const override { return sources_[0]->facts(); }
  std::string vocab_path() const override { return sources_[0]->vocab_path(); }
  KeptFile kept_file() const override { return sources_[0]->kept_file(); }
  std::string unlike_kept(const std::string& bytes, const std::string& path) const override {
    return sources_[0]->unlike_kept(bytes, path);
  }
  std::string fingerprint() const override {
    std::string s = "mix:";
    for (size_t i = 0; i < sources_.size(); ++i)
      s += " [weight " + std::to_string(entries_[i].weight) + ": " + sources_[i]->fingerprint() + "]";
    return s;
  }
  std::string note() const override {
    std::string n;
    for (const auto& s : sources_) n += s->note().empty() ? "" : (n.empty() ? "" : "\n") + s->note();
    return n;
  }
  std::unique_ptr<Dataset> split(const std::string& name, const SampleShape& sample,
                                 const WindowOptions& windows) const override {
    std::vector<std::unique_ptr<Dataset>> parts = split_parts(name, sample, windows);
    if (name != "train") return std::make_unique<Owning<ConcatDataset>>(std::move(parts));
    int64_t total = 0;
    std::vector<double> weights;
    for (size_t i = 0; i < parts.size(); ++i) total += parts[i]->size(), weights.push_back(entries_[i].weight);
    return std::make_unique<Owning<MixDataset>>(std::move(parts), weights, total);
  }
  std::vector<std::string> part_names() const override {
    std::vector<std::string> names;
    for (const MixEntry& e : entries_) names.push_back(e.dir);
    return names;
  }
  std::vector<std::unique_ptr<Dataset>> split_parts(const std::string& name, const SampleShape& sample,
                                                    const WindowOptions& windows) const override {
    std::vector<std::unique_ptr<Dataset>> parts;
    for (const auto& s : sources_) parts.push_back(s->split(name, sample, windows));
    return parts;
  }
  std::string row_unit() const override { return "tokens"; }
  std::string describe(int64_t n, const SampleShape& sample) const override {
    return sources_[0]->describe(n, sample) + " mixed from " + std::to_string(sources_.size()) + " sources";
  }

 private:
  std::vector<MixEntry> entries_;
  std::vector<std::unique_ptr<DataSource>> sources_;
};

}  // namespace

std::unique_ptr<DataSource> open_mix_source(const std::vector<MixEntry>& entries, InputKind input) {
  require(!entries.empty(), "data.mix has no source with a weight > 0");
  return std::make_unique<MixSource>(entries, input);
}

}  // namespace dtrain
