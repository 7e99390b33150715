// What kinds share, written once. TableModelKind: the model.* keys read, checked, completed and
// described through the kind's key table (every kind). LanguageModelKind adds what every language
// model does the same way: the vocabulary taken from the data or a weights file's embedding; token
// windows of model.seq_len; perplexity; model.dropout. A kind (transformer, llama) names its table,
// its checks, its units and its embedding's tensor name.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/config_keys.hpp"
#include "core/error.hpp"
#include "nn/model_kind.hpp"

namespace dtrain {

// The typed config of a ModelConfig: its values (each checked by the kind already) over the defaults.
template <class Config>
Config config_from(const ModelConfig& c, const ConfigKeyTable<Config>& keys) {
  Config t;
  for (const auto& [name, v] : c.values.items()) {
    auto it = keys.find("model." + name);
    DT_ASSERT(it != keys.end());
    it->second.set(t, json_config_text(v));
  }
  return t;
}

// What a kind whose model.* keys are a ConfigKeyTable does the same way: its keys read, checked,
// completed and described through the table. Config: a struct of the values, and what the kind
// checks of them together in check().
template <class Config>
class TableModelKind : public ModelKind {
 public:
  virtual const ConfigKeyTable<Config>& table() const = 0;
  // Values that do not fit together (Error naming the key and the fix); data_known as in validate().
  virtual void check(const Config& t, bool data_known) const = 0;
  Config config(const ModelConfig& c) const { return config_from(c, table()); }

  std::string describe_keys() const override {
    const Config defaults;
    std::string out;
    for (const auto& [k, key] : table()) out += describe_config_key(k, key.get(defaults), key.type, key.lo, key.hi, key.help);
    return out;
  }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& [k, key] : table()) out.push_back(k.substr(6));
    return out;
  }
  Json parse(const std::string& name, const std::string& text, const std::string& origin) const override {
    auto it = table().find("model." + name);
    DT_ASSERT(it != table().end());
    Config t;
    try {
      it->second.set(t, text);
    } catch (const Error& e) {
      std::string msg = e.what();
      auto p = msg.find("(--set)");
      if (p != std::string::npos) msg.replace(p, 7, "(" + origin + ")");
      throw Error(msg);
    }
    return it->second.get(t);
  }
  Json complete(const ModelConfig& c) const override {
    const Config t = config(c);
    Json out = Json::object();
    out["kind"] = name();
    for (const auto& [k, key] : table()) out[k.substr(6)] = key.get(t);
    return out;
  }
  void validate(const ModelConfig& c, bool data_known) const override {
    const Config t = config(c);
    check(t, data_known);
    for (const auto& [k, key] : table())
      if (key.type == "int") require_config_range(k, key.get(t).template get<int64_t>(), key.lo, key.hi, key.help);
  }
};

// Config: a struct with vocab_size, seq_len and dropout, and validate(bool vocab_known).
template <class Config>
class LanguageModelKind : public TableModelKind<Config> {
 public:
  using TableModelKind<Config>::config;
  using TableModelKind<Config>::name;
  virtual std::string embedding_name() const = 0;  // its [vocab, dim] table's tensor name
  void check(const Config& t, bool data_known) const override { t.validate(data_known || t.vocab_size > 0); }

  void fit_to_data(ModelConfig& c, const DataFacts& data, const std::string& data_name) const override {
    const int64_t given = config(c).vocab_size;
    require(given == 0 || given == data.vocab_size,
            "model.vocab_size = " + std::to_string(given) + " but the vocabulary of " + data_name + " has " +
                std::to_string(data.vocab_size) +
                " words: leave model.vocab_size out (it is taken from the data), or point data.dir at the data "
                "the model is meant for");
    c.values["vocab_size"] = data.vocab_size;
  }
  void fit_to_weights(ModelConfig& c, const std::map<std::string, std::vector<int64_t>>& shapes,
                      const std::string& file) const override {
    const std::string table_name = embedding_name();
    auto it = shapes.find(table_name);  // the vocabulary size is the embedding's rows
    require(it != shapes.end() && it->second.size() == 2,
            file + ": " + table_name + " is " + (it == shapes.end() ? "missing" : "not a matrix [vocab, dim]") +
                ": it is not a model of model.kind = " + name());
    c.values["vocab_size"] = it->second[0];
  }
  SampleShape sample_shape(const ModelConfig& c) const override {
    const int64_t T = config(c).seq_len;
    return {InputKind::tokens, T, T};  // a window of tokens; the next token at each position
  }
  Metric metric() const override { return Metric::perplexity; }
  float dropout(const ModelConfig& c) const override { return config(c).dropout; }
};

}  // namespace dtrain
