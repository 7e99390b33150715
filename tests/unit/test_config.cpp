// Config: every key settable from TOML and --set, unknown keys and bad values rejected with a
// message naming the key, model config JSON round trip.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "models/registry.hpp"
#include "models/transformer/config.hpp"
#include "train/config.hpp"
#include "error_of.hpp"

using namespace dtrain;

namespace {
std::string write_temp(const std::string& name, const std::string& text) {
  auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}
}  // namespace

TEST(Config, SetParsesEveryType) {
  RunConfig c;
  c.set("train.lr", "0.001");
  c.set("train.batch_size", "64");
  c.set("model.causal", "false");
  c.set("model.activation", "gelu");
  c.set("model.norm", "pre");
  c.set("data.dir", "/x/y");
  EXPECT_FLOAT_EQ(c.optim.lr, 0.001f);
  EXPECT_EQ(c.train.batch_size, 64);
  const TransformerConfig m = transformer_config(c.model);
  EXPECT_FALSE(m.causal);
  EXPECT_EQ(m.activation, Activation::gelu);
  EXPECT_TRUE(m.pre_norm);
  EXPECT_EQ(c.data.dir, "/x/y");
}

TEST(Config, UnknownKeyNamesItAndItsNeighbours) {
  RunConfig c;
  std::string e = error_of([&] { c.set("train.lrr", "1"); });
  EXPECT_NE(e.find("train.lrr"), std::string::npos) << e;
  EXPECT_NE(e.find("train.lr"), std::string::npos) << e;  // suggests the known keys of [train]
  e = error_of([&] { c.set("nosuch.key", "1"); });
  EXPECT_NE(e.find("nosuch.key"), std::string::npos) << e;
}

TEST(Config, BadValuesAreErrors) {
  RunConfig c;
  EXPECT_NE(error_of([&] { c.set("train.epochs", "abc"); }).find("train.epochs"), std::string::npos);
  EXPECT_NE(error_of([&] { c.set("model.causal", "maybe"); }).find("true or false"), std::string::npos);
  EXPECT_NE(error_of([&] { c.set("model.activation", "tanh"); }).find("relu|gelu"), std::string::npos);
  c.set("train.lr", "-1");
  EXPECT_NE(error_of([&] { c.validate(); }).find("train.lr"), std::string::npos);
  c.set("train.lr", "0.01");
  c.set("model.heads", "3");
  EXPECT_NE(error_of([&] { c.validate(); }).find("model.heads"), std::string::npos);
  c.set("model.heads", "4");
  EXPECT_NE(error_of([&] { c.set("train.batch_size", "0"); }).find("train.batch_size = 0 (--set) is outside 1.."),
            std::string::npos);
  c.train.batch_size = 0;  // set in code: validate() checks the same range
  EXPECT_NE(error_of([&] { c.validate(); }).find("train.batch_size = 0 is outside 1.."), std::string::npos);
}

// Every integer is range-checked where it is parsed, against the field it lands in: nothing is cut
// to 32 bits (parallel.dp = 2^32 + 1 ran as dp 1) and no timeout overflows its milliseconds.
TEST(Config, IntegersAreRangeCheckedWhereParsed) {
  RunConfig c;
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"parallel.dp", "4294967297"}, {"parallel.timeout_s", "99999999999999"}, {"train.threads", "4294967297"},
           {"parallel.tp", "-2"}, {"train.seed", "-1"}, {"model.dim", "99999999999999999999999"}}) {
    const std::string e = error_of([&] { c.set(key, value, "test.toml"); });
    EXPECT_NE(e.find(key + " = " + value + " (test.toml) is outside "), std::string::npos) << e;
  }
  EXPECT_EQ(c.parallel.dp, 0);  // nothing was assigned
  c.set("parallel.timeout_s", "2592000");
  EXPECT_EQ(c.parallel.timeout_s, 2592000);
}

TEST(Config, AMisspeltKeySuggestsTheNearestAndKeysAreDescribed) {
  RunConfig c;
  for (const auto& [typo, meant] : std::vector<std::pair<std::string, std::string>>{
           {"train.lrr", "train.lr"}, {"lr", "train.lr"}, {"model.lr", "train.lr"}, {"train.batchsize", "train.batch_size"},
           {"parallel.pp_schedul", "parallel.pp_schedule"}, {"model.dims", "model.dim"}}) {
    const std::string e = error_of([&] { c.set(typo, "1"); });
    EXPECT_NE(e.find("did you mean " + meant + "?"), std::string::npos) << typo << ": " << e;
  }
  EXPECT_EQ(error_of([&] { c.set("nosuch.anything_at_all", "1"); }).find("did you mean"), std::string::npos);
  const std::string keys = RunConfig::describe_keys();
  for (const std::string& k : RunConfig::known_keys()) EXPECT_NE(keys.find(k + " "), std::string::npos) << k;
  EXPECT_NE(keys.find("train.batch_size                   512          int 1..2147483648\n    samples (token windows, images) per"),
            std::string::npos) << keys.substr(0, 400);
  EXPECT_NE(keys.find("model.norm                         \"post\"       post|pre\n"), std::string::npos);
}

TEST(Config, TomlLoadsAndRejectsUnknownKeysWithFileName) {
  std::string p = write_temp("dtrain_cfg_ok.toml", "[model]\ndim = 64\ndropout = 0.25\n[train]\nlr = 3e-4\nseed = 7\n");
  RunConfig c;
  c.load_toml(p);
  EXPECT_EQ(transformer_config(c.model).dim, 64);
  EXPECT_FLOAT_EQ(transformer_config(c.model).dropout, 0.25f);
  EXPECT_FLOAT_EQ(c.optim.lr, 3e-4f);
  EXPECT_EQ(c.train.seed, 7u);
  std::string bad = write_temp("dtrain_cfg_bad.toml", "[model]\ndimm = 64\n");
  std::string e = error_of([&] { RunConfig().load_toml(bad); });
  EXPECT_NE(e.find("model.dimm"), std::string::npos) << e;
  EXPECT_NE(e.find(bad), std::string::npos) << e;
  std::string broken = write_temp("dtrain_cfg_broken.toml", "[model\ndim = 64\n");
  EXPECT_NE(error_of([&] { RunConfig().load_toml(broken); }).find("not valid TOML"), std::string::npos);
  EXPECT_NE(error_of([&] { RunConfig().load_toml("/nonexistent/x.toml"); }).find("/nonexistent/x.toml"),
            std::string::npos);
}

TEST(Config, ModelJsonRoundTrip) {
  TransformerConfig t;
  t.vocab_size = 123;
  t.dim = 48;
  t.heads = 3;
  t.pre_norm = true;
  t.tied = true;
  t.activation = Activation::gelu;
  t.dropout = 0.3f;
  const ModelConfig m = to_model_config(t);
  ModelConfig r = model_from_json(parse_json(model_to_json(m).dump(), "test"));
  EXPECT_EQ(model_to_json(r), model_to_json(m));
  EXPECT_EQ(r.kind, "transformer");
  const TransformerConfig back = transformer_config(r);
  EXPECT_EQ(back.vocab_size, 123);
  EXPECT_TRUE(back.tied);
  EXPECT_EQ(back.activation, Activation::gelu);
  EXPECT_EQ(back.dropout, 0.3f);
}

TEST(Config, EveryKnownKeyRoundTripsThroughJson) {
  // config.json holds every run key, model.kind and every key of the config's kind (not another
  // kind's), each a known key
  for (const char* kind : {"transformer", "llama"}) {
    RunConfig c;
    c.set("model.kind", kind);
    std::set<std::string> written;
    const Json j = c.to_json();
    for (const auto& [section, obj] : j.items())
      for (const auto& [name, v] : obj.items()) written.insert(section + "." + name);
    const std::vector<std::string> known = RunConfig::known_keys();
    for (const std::string& k : written) EXPECT_TRUE(std::count(known.begin(), known.end(), k)) << k;
    std::vector<std::string> kind_keys = model_kind(kind).keys();
    for (const std::string& k : known) {
      const bool model_key = k.rfind("model.", 0) == 0 && k != "model.kind";
      const bool of_kind = model_key && std::count(kind_keys.begin(), kind_keys.end(), k.substr(6));
      EXPECT_EQ(written.count(k), !model_key || of_kind ? 1u : 0u) << kind << ": " << k;
    }
  }
}

TEST(Config, ValuesMustBeUtf8ForTheJsonTheyAreWrittenTo) {
  RunConfig c;
  const std::string e = error_of([&] { c.set("data.dir", "/data/caf\xe9", "--set"); });
  EXPECT_NE(e.find("data.dir (--set) is not valid UTF-8"), std::string::npos) << e;
  c.set("data.dir", "/data/caf\xc3\xa9");  // é in UTF-8
  EXPECT_NO_THROW((void)c.to_json().dump());
}

TEST(Config, NegativeStepCountsAndHugeBatchesAreNamed) {
  RunConfig c;
  c.train.checkpoint_every = -1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("train.checkpoint_every = -1 is outside 0.."), std::string::npos);
  c.train.checkpoint_every = 0;
  c.train.eval_every = -2;
  EXPECT_NE(error_of([&] { c.validate(); }).find("train.eval_every = -2"), std::string::npos);
  c.train.eval_every = 0;
  c.train.batch_size = 99999999;
  EXPECT_NE(error_of([&] { c.validate(); }).find("train.batch_size = 99999999 makes batches of more than 2^31"),
            std::string::npos);
  c.train.batch_size = 8;
  EXPECT_EQ(error_of([&] { c.validate(); }), "");
}

TEST(Config, GlobalBatchAndGradAccumAreNotBothSet) {
  RunConfig c;
  c.set("train.global_batch", "32");
  EXPECT_EQ(error_of([&] { c.validate(); }), "");
  c.set("train.grad_accum", "2");
  EXPECT_EQ(error_of([&] { c.validate(); }),
            "train.global_batch = 32 and train.grad_accum = 2 both set the micro-steps: keep train.global_batch (the "
            "micro-steps follow from it and train.batch_size) and drop train.grad_accum");
  EXPECT_NE(error_of([&] { c.set("train.global_batch", "-1"); }).find("train.global_batch"), std::string::npos);
}
