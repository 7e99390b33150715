// The model interface: a kind's built units are the one source of the model's sizes and costs (tied
// here to independent counts), a plan on a counting arena is the memory the model then takes, the
// registry finds kinds by model.kind, and configs or checkpoints without a kind are Transformers.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "model_test_util.hpp"
#include "models/cnn/kind.hpp"
#include "models/llama/kind.hpp"
#include "models/registry.hpp"
#include "train/config.hpp"

using namespace dtrain;

namespace {

TransformerConfig course(int64_t vocab) {  // the course's model (DESIGN §5)
  TransformerConfig c;
  c.vocab_size = vocab;
  return c;
}

// Counted by hand from the architecture (docs/model.md), independently of the units.
int64_t counted_params(const TransformerConfig& c) {
  const int64_t d = c.dim, f = c.ff_dim, V = c.vocab_size;
  const int64_t block = (3 * d * d + 3 * d) + (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d;
  return V * d + (c.learned_positions ? c.seq_len * d : 0) + c.layers * block + (c.final_norm ? 2 * d : 0) +
         (c.tied ? 0 : V * d) + (c.head_bias ? V : 0);
}

}  // namespace

TEST(ModelInterface, ParameterCountOfTheBuiltUnitsIsTheArchitecturesCount) {
  // The course's model on WikiText-2's vocabulary size: 2 layers, d 128, ff 2048, untied with bias.
  const TransformerConfig c = course(33278);
  EXPECT_EQ(transformer_units(c).num_params(), counted_params(c));
  // embedding and classifier 2·33278·128 + bias 33278; a block 593024 (PyTorch's TransformerEncoderLayer(128,
  // 4, 2048) counts the same); the final norm 256
  EXPECT_EQ(counted_params(c), 9738750);
  for (bool tied : {false, true})
    for (bool learned : {false, true})
      for (bool final_norm : {false, true}) {
        TransformerConfig v = course(97);
        v.tied = tied;
        v.learned_positions = learned;
        v.final_norm = final_norm;
        v.head_bias = !tied;
        const UnitList units = transformer_units(v);
        EXPECT_EQ(units.num_params(), counted_params(v)) << tied << learned << final_norm;
        ASSERT_EQ(units.modules.size(), size_t(v.layers + 2));
        EXPECT_EQ(units.modules.front()->unit().name(), "embed");
        EXPECT_EQ(units.modules.back()->unit().name(), "head");
        // a tied head reads the embedding's parameters, and says so (pipeline plans and FSDP use it)
        const std::vector<std::vector<int>> reads = units.reads();
        EXPECT_EQ(reads.back(), tied ? std::vector<int>{0} : std::vector<int>{});
      }
}

TEST(ModelInterface, TrainingFlopsAreTheUnitsSumAndTheFormula) {
  TransformerConfig c = course(500);
  c.seq_len = 16;
  c.layers = 3;
  const UnitList units = transformer_units(c);
  const double d = double(c.dim), f = double(c.ff_dim), V = double(c.vocab_size), T = double(c.seq_len);
  // per token: 6 per matmul parameter (forward and both gradients), attention's two T×d products
  // forward and backward, and the embedding's 3d (positions, dropout, the gradient's scatter)
  const double per_token = 6.0 * (3 * (4 * d * d + 2 * d * f) + V * d) + 12.0 * 3 * T * d + 3 * d;
  EXPECT_DOUBLE_EQ(units.train_flops_per_sample(), per_token * T);
  double sum = 0.0;
  for (double x : units.unit_costs()) sum += x;
  EXPECT_DOUBLE_EQ(sum, units.train_flops_per_sample());  // the pipeline balances the same numbers
  const Model m(transformer_units(c), 2);
  EXPECT_DOUBLE_EQ(m.train_flops_per_sample(), per_token * T);
  EXPECT_EQ(m.num_params(), counted_params(c));
}

TEST(ModelInterface, CountingPlanIsWhatTheModelTakes) {
  TransformerConfig c = course(61);
  c.dim = 32;
  c.heads = 4;
  c.ff_dim = 48;
  c.seq_len = 8;
  c.layers = 3;
  for (const StagePlan& plan : {StagePlan{}, StagePlan{{{0, 2}}, 3, false}, StagePlan{{{1, 3}, {4, 5}}, 2, true},
                                StagePlan{{{2, 5}}, 1, true}})
    for (int64_t batch : {1, 5}) {
      UnitList units = transformer_units(c);
      const size_t planned = Model::planned_bytes(units, batch, plan);
      ASSERT_EQ(units.modules.size(), 5u);  // handed back, to be built
      const Model m(std::move(units), batch, cpu_device(), ParamStorage::bound_by_caller, plan);
      EXPECT_EQ(planned, m.activation_bytes()) << plan.stages.size() << " stages, batch " << batch;
    }
  // linear in the batch beyond a constant part (the position table, the loss sum)
  UnitList units = transformer_units(c);
  const size_t one = Model::planned_bytes(units, 1, {}), ten = Model::planned_bytes(units, 10, {});
  EXPECT_GT(ten, 9 * one);
}

TEST(ModelInterface, KindsAreFoundByNameAndTheDefaultIsTheTransformer) {
  EXPECT_EQ(model_kind("transformer").name(), "transformer");
  EXPECT_EQ(ModelConfig{}.kind, "transformer");
  const std::string e = error_of([] { model_kind("resnet"); });
  EXPECT_NE(e.find("model.kind = \"resnet\" is not a model dtrain knows: use one of transformer"), std::string::npos) << e;
  RunConfig cfg;
  const std::string set = error_of([&] { cfg.set("model.kind", "resnet", "run.toml"); });
  EXPECT_NE(set.find("model.kind = resnet (run.toml) is not allowed: use one of transformer"), std::string::npos) << set;
  // A checkpoint's model section from before kinds existed (no "kind") is a Transformer.
  Json old = model_to_json(to_model_config(course(40)));
  old.erase("kind");
  const ModelConfig back = model_from_json(old, "old index.json");
  EXPECT_EQ(back.kind, "transformer");
  EXPECT_EQ(transformer_config(back).vocab_size, 40);
  Json other = old;
  other["kind"] = "resnet";
  const std::string k = error_of([&] { model_from_json(other, "index.json"); });
  EXPECT_NE(k.find("model.kind = resnet (index.json) is not allowed"), std::string::npos) << k;
  // `dtrain config keys` lists the kinds and each kind's keys
  const std::string keys = RunConfig::describe_keys();
  EXPECT_NE(keys.find("model.kind = transformer: "), std::string::npos);
  EXPECT_NE(keys.find("model.ff_dim"), std::string::npos);
}

TEST(ModelInterface, AKindGivenAfterItsKeysReadsThemByItsTable) {
  // TOML reads [model]'s keys in order, `kind` after `ff_dim`: the values wait for their kind
  RunConfig c;
  c.set("model.ff_dim", "0", "a.toml");    // the Transformer refuses 0; Llama takes it (8·d/3)
  c.set("model.kv_heads", "2", "a.toml");  // Llama's key only
  c.set("model.kind", "llama", "a.toml");
  c.validate();
  EXPECT_EQ(llama_config(c.model).ff_dim, 0);
  EXPECT_EQ(llama_config(c.model).kv_heads, 2);
  // without that kind, each is named with where it came from
  RunConfig t;
  t.set("model.ff_dim", "0", "b.toml");
  const std::string e = error_of([&] { t.validate(); });
  EXPECT_NE(e.find("model.ff_dim = 0 (b.toml) is outside 1.."), std::string::npos) << e;
  RunConfig u;
  u.set("model.kv_heads", "2", "c.toml");
  const std::string k = error_of([&] { u.validate(); });
  EXPECT_NE(k.find("model.kv_heads (c.toml) is not a key of model.kind = transformer"), std::string::npos) << k;
  // a value no kind takes is refused at once
  EXPECT_NE(error_of([&] { RunConfig().set("model.heads", "0", "d.toml"); }).find("model.heads = 0 (d.toml)"),
            std::string::npos);
}

TEST(ModelInterface, LlamaUnitsCountAsTheArchitecture) {
  LlamaConfig c;
  c.vocab_size = 101;
  c.dim = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 3;
  c.ff_dim = 96;
  const int64_t d = c.dim, hd = d / c.heads, K = c.kv_heads, f = c.ff_dim;
  const int64_t layer = d + d * d + 2 * K * hd * d + d * d + d + 3 * d * f;  // norms, q, k, v, o, gate/up/down
  const UnitList units = llama_units(c);
  EXPECT_EQ(units.num_params(), 2 * c.vocab_size * d + c.layers * layer + d);
  c.tied = true;
  EXPECT_EQ(llama_units(c).num_params(), c.vocab_size * d + c.layers * layer + d);
  EXPECT_EQ(llama_units(c).reads().back(), std::vector<int>{0});
  EXPECT_EQ(units.modules[1]->unit().params()[1].name, "model.layers.0.self_attn.q_proj.weight");
}

TEST(ModelInterface, CnnUnitsCountAsPyTorchsMnistExample) {
  CnnConfig c;  // the defaults: PyTorch's MNIST example on 1×28×28 images of 10 classes
  c.in_channels = 1;
  c.height = c.width = 28;
  c.classes = 10;
  const UnitList units = cnn_units(c);
  // conv1 32·9 + 32, conv2 64·32·9 + 64, fc1 128·9216 + 128, fc2 10·128 + 10 (PyTorch counts 1,199,882)
  EXPECT_EQ(units.num_params(), 320 + 18496 + 1179776 + 1290);
  ASSERT_EQ(units.modules.size(), 4u);
  const char* names[] = {"conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(units.modules[i]->unit().params()[0].name, names[i]);
  EXPECT_EQ(units.sample, (SampleShape{InputKind::images, 784, 1}));
  // FLOPs per image: 2 per MAC and pass; 3 passes, but 2 for conv1 (no input gradient); linears 6·in·out
  const double conv1 = 26.0 * 26 * 32 * 9, conv2 = 24.0 * 24 * 64 * 32 * 9;
  EXPECT_DOUBLE_EQ(units.train_flops_per_sample(), 4 * conv1 + 6 * conv2 + 6.0 * (9216 * 128 + 128 * 10));
  // a counting plan is what the model takes
  UnitList again = cnn_units(c);
  const size_t planned = Model::planned_bytes(again, 7, {});
  const Model m(std::move(again), 7, cpu_device(), ParamStorage::bound_by_caller, {});
  EXPECT_EQ(planned, m.activation_bytes());
  // tensor parallelism: one line, naming what to use instead
  const std::string tp = error_of([&] { cnn_units(c, cpu_device(), TpSlice{2, 0, false}); });
  EXPECT_NE(tp.find("parallel.tp = 2: model.kind = cnn has no tensor-parallel regions"), std::string::npos) << tp;
  // sizes the data gives: a contradicting value is named
  ModelConfig mc{"cnn", Json::object()};
  mc.values["height"] = 32;
  const std::string fit = error_of([&] { cnn_kind().fit_to_data(mc, DataFacts{0, 1, 28, 28, 10}, "fm"); });
  EXPECT_NE(fit.find("model.height = 32 but the images of fm have 28 rows of pixels"), std::string::npos) << fit;
  // a kernel list that does not match the convolutions, a kernel larger than its input
  CnnConfig k = c;
  k.kernel = "3,3,3";
  EXPECT_NE(error_of([&] { k.validate(); }).find("gives 3 sizes for 2 convolutions"), std::string::npos);
  k.kernel = "30";
  EXPECT_NE(error_of([&] { k.validate(); }).find("kernel 30 is larger than its 28×28 input"), std::string::npos);
  k.kernel = "3";
  k.channels = "32,x";
  EXPECT_NE(error_of([&] { k.validate(); }).find("\"x\" is not a positive whole number"), std::string::npos);
}
