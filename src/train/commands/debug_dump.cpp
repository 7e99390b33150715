// dump_parity (see debug_dump.hpp), for any model kind and its data. Dropout is off: the two sides
// draw different masks.
#include "train/commands/debug_dump.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "ckpt/safetensors.hpp"
#include "core/output_path.hpp"
#include "data/dataset.hpp"
#include "data/source.hpp"
#include "models/registry.hpp"
#include "train/checkpoint/checkpoint.hpp"

namespace dtrain {

void dump_parity(const RunConfig& cfg_in, const std::string& out, int64_t steps) {
  RunConfig cfg = cfg_in;
  const ModelKind& kind = kind_of(cfg.model);
  const std::unique_ptr<DataSource> source = open_run_data(cfg.data, kind.sample_shape(cfg.model).input);
  kind.fit_to_data(cfg.model, source->facts(), cfg.data.dir);
  for (const std::string& key : kind.keys())  // every dropout rate of the kind (dropout, conv_dropout, …)
    if (key.size() >= 7 && key.compare(key.size() - 7, 7, "dropout") == 0) cfg.model.values[key] = 0.0;
  kind.validate(cfg.model, true);
  const SampleShape shape = kind.sample_shape(cfg.model);
  const int64_t B = cfg.train.batch_size, I = shape.inputs, T = shape.targets;
  const std::unique_ptr<Dataset> data = source->split("train", shape, {cfg.data.stride, cfg.data.document_boundaries});
  require(data->size() >= B * steps, "parity dump needs " + std::to_string(B * steps) + " samples: use a smaller "
                                     "train.batch_size or fewer steps");
  check_output_folder(out, "dtrain debug dump", holds_only({"*.safetensors"}));
  std::filesystem::create_directories(out);
  Model model(kind.units(cfg.model, cpu_device()), B);
  const int64_t V = model.outputs();
  model.init_weights(cfg.train.seed);
  if (!cfg.train.init_from.empty()) load_weights(cfg.train.init_from, cfg.model, model);
  const OptimizerConfig& oc = cfg.optim;
  auto str = [](double x) {
    char b[64];
    std::snprintf(b, sizeof b, "%.9g", x);
    return std::string(b);
  };
  write_safetensors(out + "/weights.safetensors", weight_views(model),
                    {{"dtrain.model", cfg.to_json()["model"].dump()}, {"lr", str(oc.lr)}, {"beta1", str(oc.beta1)},
                     {"beta2", str(oc.beta2)}, {"eps", str(oc.eps)}, {"weight_decay", str(oc.weight_decay)},
                     {"steps", std::to_string(steps)}});
  // inputs: int32 token ids or float pixels, 4 bytes each
  std::vector<int32_t> in(size_t(steps * B * I)), tg(size_t(steps * B * T));
  for (int64_t i = 0; i < steps * B; ++i) data->get(i, in.data() + i * I, tg.data() + i * T);
  const DType in_type = shape.input == InputKind::tokens ? DType::i32 : DType::f32;
  write_safetensors(out + "/batch.safetensors",
                    {{"inputs", in_type, {steps, B, I}, in.data()}, {"targets", DType::i32, {steps, B, T}, tg.data()}});

  StepContext ctx;
  ctx.B = B;
  ctx.T = T;
  ctx.loss_scale = 1.0f / float(B * T);
  ctx.precision = cfg.train.compute_precision();
  std::vector<float> logits(size_t(B * T * V));
  const BatchView batch{shape, B, in.data(), tg.data()};  // the first step's
  model.predict(batch, ctx, logits.data());
  model.zero_grad();
  float loss = float(model.forward_backward(batch, ctx) / double(B * T));
  std::vector<std::vector<float>> grads;
  std::vector<SafeTensorView> outv{{"logits", DType::f32, {B, T, V}, logits.data()}, {"loss", DType::f32, {1}, &loss}};
  for (Unit* u : model.units())
    for (const auto& p : u->params()) {
      grads.emplace_back(u->grad_data() + p.offset, u->grad_data() + p.offset + p.numel());
      outv.push_back({"grad." + p.name, DType::f32, p.shape, nullptr});
    }
  for (size_t i = 0; i < grads.size(); ++i) outv[i + 2].data = grads[i].data();
  // a mixture of experts: its balance losses' weighted share of the loss, per sample
  const ExpertLoad load = model.take_expert_load();
  float aux = load.samples > 0 ? float(load.balance_loss / load.samples) : 0.0f;
  if (!load.empty()) outv.push_back({"aux_loss", DType::f32, {1}, &aux});

  Optimizer opt(cfg.optim, unit_shards(model.units()));
  std::vector<float> losses(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    model.zero_grad();
    const BatchView step{batch.shape, B, in.data() + s * B * I, tg.data() + s * B * T};
    losses[size_t(s)] = float(model.forward_backward(step, ctx) / double(B * T));
    opt.step(oc.lr);
  }
  outv.push_back({"losses", DType::f32, {steps}, losses.data()});
  write_safetensors(out + "/dtrain.safetensors", outv);
}

}  // namespace dtrain
