// Checkpoints: weights + optimizer + trainer state round trip exactly; another model's checkpoint
// is refused by name; rewriting a checkpoint replaces it whole; damaged JSON in it is named.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "train/config.hpp"

using namespace dtrain;
namespace fs = std::filesystem;

namespace {
ModelConfig tiny(int64_t dim = 16) {
  ModelConfig m;
  m.vocab_size = 29;
  m.seq_len = 6;
  m.dim = dim;
  m.heads = 2;
  m.layers = 2;
  m.ff_dim = 24;
  return m;
}
std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("dtrain_ckpt_test_" + name);
  fs::remove_all(p);
  return p.string();
}
}  // namespace

TEST(Checkpoint, RoundTripIsExact) {
  TransformerLM a(tiny(), 2);
  a.init_weights(3);
  Optimizer oa(OptimizerConfig{}, unit_shards(a.units()));
  for (Unit* u : a.units())
    for (const ParamInfo& p : u->params())
      for (int64_t i = p.offset; i < p.offset + p.numel(); ++i) u->grad_data()[i] = 0.01f * float(i % 7) - 0.02f;
  oa.step(0.01f);
  oa.step(0.01f);
  TrainerState st;
  st.global_step = 2;
  st.epoch = 1;
  st.batch_in_epoch = 5;
  st.epoch_loss_sum = 12.5;
  const std::string dir = temp_dir("rt") + "/step_2";
  save_checkpoint(dir, a, &oa, &st, Json::object(), "");

  TransformerLM b(tiny(), 2);
  b.init_weights(99);
  Optimizer ob(OptimizerConfig{}, unit_shards(b.units()));
  TrainerState sb;
  load_checkpoint(dir, b, &ob, &sb);
  for (size_t u = 0; u < a.units().size(); ++u)
    for (const ParamInfo& p : a.units()[u]->params())  // the alignment padding between them is not saved
      for (int64_t i = p.offset; i < p.offset + p.numel(); ++i)
        ASSERT_EQ(a.units()[u]->param_data()[i], b.units()[u]->param_data()[i]) << p.name;
  auto sa = oa.state(), sbv = ob.state();
  ASSERT_EQ(sa.size(), sbv.size());
  for (size_t k = 0; k < sa.size(); ++k)
    for (int64_t i = 0; i < sa[k].numel; ++i) ASSERT_EQ(sa[k].data[i], sbv[k].data[i]);
  EXPECT_EQ(ob.steps_taken(), 2);
  EXPECT_EQ(sb.global_step, 2);
  EXPECT_EQ(sb.batch_in_epoch, 5);
  EXPECT_DOUBLE_EQ(sb.epoch_loss_sum, 12.5);
}

TEST(Checkpoint, OtherModelIsRefusedByName) {
  TransformerLM a(tiny(16), 2);
  a.init_weights(1);
  const std::string dir = temp_dir("other") + "/m";
  save_checkpoint(dir, a, nullptr, nullptr, Json::object(), "");
  TransformerLM b(tiny(32), 2);
  try {
    load_checkpoint(dir, b, nullptr, nullptr);
    FAIL() << "loading a dim-16 checkpoint into a dim-32 model must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.dim"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, RewriteReplacesWholeAndLeavesNoStaging) {
  TransformerLM a(tiny(), 2);
  a.init_weights(1);
  const std::string root = temp_dir("rewrite"), dir = root + "/model_best";
  save_checkpoint(dir, a, nullptr, nullptr, Json::object(), "");
  a.init_weights(2);
  save_checkpoint(dir, a, nullptr, nullptr, Json::object(), "");
  TransformerLM b(tiny(), 2);
  load_checkpoint(dir, b, nullptr, nullptr);
  EXPECT_EQ(a.units()[0]->param_data()[0], b.units()[0]->param_data()[0]);
  for (const auto& e : fs::directory_iterator(root))
    EXPECT_EQ(e.path().filename(), "model_best") << "left behind: " << e.path();
}

TEST(Checkpoint, LatestAndPrune) {
  TransformerLM a(tiny(), 2);
  a.init_weights(1);
  const std::string run = temp_dir("prune");
  TrainerState st;
  for (int s : {3, 10, 7}) {
    char name[32];
    std::snprintf(name, sizeof name, "/checkpoints/step_%09d", s);
    save_checkpoint(run + name, a, nullptr, &st, Json::object(), "");
  }
  EXPECT_NE(latest_checkpoint(run).find("step_000000010"), std::string::npos);
  prune_checkpoints(run, 2);
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step_000000003"));
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_000000007"));
  EXPECT_EQ(latest_checkpoint(temp_dir("empty")), "");
}

// A damaged trainer.json or dtrain.model metadata gives one Error line naming the file (and the
// key), not nlohmann's exception or a line without the culprit.
TEST(Checkpoint, DamagedJsonIsNamed) {
  TransformerLM a(tiny(), 2);
  a.init_weights(1);
  TrainerState st;
  const std::string dir = temp_dir("badjson") + "/step_1", trainer = dir + "/trainer.json";
  save_checkpoint(dir, a, nullptr, &st, Json::object(), "");
  auto load_error = [&] {
    try {
      TransformerLM b(tiny(), 2);
      TrainerState sb;
      load_checkpoint(dir, b, nullptr, &sb);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  write_file_atomic(trainer, "{\"global_step\": 3,\n garbage");
  EXPECT_EQ(load_error().rfind("invalid JSON in " + trainer + " at line 2, column 2 (byte 20): ", 0), 0u)
      << load_error();
  write_file_atomic(trainer, "{\"global_step\": 3, \"epoch\": \"one\"}");
  EXPECT_EQ(load_error(), trainer + ": \"epoch\" is a string, expected a 64-bit integer; fix the JSON text");
  write_file_atomic(trainer, "{\"global_step\": 3}");
  EXPECT_EQ(load_error(), trainer + " has no key \"epoch\"; fix the JSON text");

  const std::string weights = dir + "/model.safetensors";
  write_safetensors(weights, weight_views(a), {{"dtrain.model", "{\"dim\": 16, \"dim\": 16}"}});
  EXPECT_NE(load_error().find("invalid JSON in the dtrain.model metadata of " + weights +
                              " at line 1, column 13 (byte 12): duplicate key \"dim\""),
            std::string::npos)
      << load_error();
  write_safetensors(weights, weight_views(a), {{"dtrain.model", "[16]"}});
  EXPECT_NE(load_error().find("the dtrain.model metadata of " + weights + " is a JSON array"), std::string::npos)
      << load_error();
  write_safetensors(weights, weight_views(a), {{"dtrain.model", "{\"dim\": \"x\"}"}});
  EXPECT_NE(load_error().find("model.dim = x (the dtrain.model metadata of " + weights + ")"), std::string::npos)
      << load_error();
}
