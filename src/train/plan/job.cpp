// The planner's job and layouts (see job.hpp).
#include "train/plan/job.hpp"

#include "kernels/counting_device.hpp"
#include "models/registry.hpp"

namespace dtrain {

namespace {

const char* recompute_name(Recompute r) {
  return r == Recompute::none ? "none" : r == Recompute::selective ? "selective" : "full";
}

}  // namespace

PlanJob plan_job(RunConfig cfg) {
  PlanJob job;
  job.kind = &kind_of(cfg.model);
  cfg.validate();
  job.kind->validate(cfg.model, false);  // what does not wait for the data
  bool data_known = true;
  try {
    job.kind->validate(cfg.model, true);  // the vocabulary given (model.vocab_size)
  } catch (const Error&) {
    data_known = false;
  }
  if (!data_known) {
    std::unique_ptr<DataSource> data;
    try {
      data = open_run_data(cfg.data, job.kind->sample_shape(cfg.model).input);
    } catch (const Error& e) {
      throw Error(std::string("dtrain plan: the model's size is not known without its data (") + e.what() +
                  "): point data.dir at the data it would train on, or give what the data would (a language model's "
                  "model.vocab_size)");
    }
    job.kind->fit_to_data(cfg.model, data->facts(), data->dir());
    job.kind->validate(cfg.model, true);
  }
  job.precision = cfg.train.compute_precision();
  CountingDevice dev;
  job.flops_per_sample = job.kind->units(cfg.model, dev).train_flops_per_sample();
  job.cfg = std::move(cfg);
  return job;
}

std::string Layout::describe() const {
  std::string s;
  auto add = [&](const char* name, int n) {
    if (n > 1) s += std::string(s.empty() ? "" : " × ") + name + " " + std::to_string(n);
  };
  add("pp", shape.pp);
  add("dp_replicate", shape.dp_replicate);
  add("dp_shard", shape.dp_shard);
  add("cp", shape.cp);
  add("tp", shape.tp);
  if (s.empty()) s = "1 rank";
  if (shape.ep > 1) s += ", ep " + std::to_string(shape.ep);
  if (tp_sequence && shape.tp > 1) s += ", sp";
  if (shape.pp > 1)
    s += ", " + schedule + (virtual_stages > 1 ? " v" + std::to_string(virtual_stages) : "") + " m" +
         std::to_string(microbatches > 0 ? microbatches : shape.pp);
  if (recompute != Recompute::none) s += std::string(", recompute ") + recompute_name(recompute);
  return s;
}

std::string Layout::mesh_argument() const {
  std::string s = "pp=" + std::to_string(shape.pp) + ",dp_replicate=" + std::to_string(shape.dp_replicate) +
                  ",dp_shard=" + std::to_string(shape.dp_shard) + ",cp=" + std::to_string(shape.cp) +
                  ",tp=" + std::to_string(shape.tp);
  if (shape.ep > 1) s += ",ep=" + std::to_string(shape.ep);
  if (tp_sequence && shape.tp > 1) s += ",sp=1";
  if (shape.pp > 1)
    s += ",schedule=" + schedule + ",v=" + std::to_string(virtual_stages) + ",m=" + std::to_string(microbatches);
  if (recompute != Recompute::none) s += std::string(",recompute=") + recompute_name(recompute);
  return s;
}

std::string Layout::sets() const {
  std::string s = "--set parallel.pp=" + std::to_string(shape.pp) + " --set parallel.dp_replicate=" +
                  std::to_string(shape.dp_replicate) + " --set parallel.dp_shard=" + std::to_string(shape.dp_shard) +
                  " --set parallel.tp=" + std::to_string(shape.tp);
  if (shape.cp > 1) s += " --set parallel.cp=" + std::to_string(shape.cp);
  if (shape.ep > 1) s += " --set parallel.ep=" + std::to_string(shape.ep);
  if (tp_sequence && shape.tp > 1) s += " --set parallel.tp_sequence=true";
  if (shape.pp > 1)
    s += " --set parallel.pp_schedule=" + schedule + " --set parallel.pp_virtual=" + std::to_string(virtual_stages) +
         " --set parallel.microbatches=" + std::to_string(microbatches);
  if (recompute != Recompute::none) s += std::string(" --set train.recompute=") + recompute_name(recompute);
  return s;
}

RunConfig with_layout(const PlanJob& job, const Layout& l) {
  RunConfig c = job.cfg;
  ParallelConfig& p = c.parallel;
  p.dp = 0;
  p.pp = l.shape.pp;
  p.dp_replicate = l.shape.dp_replicate;
  p.dp_shard = l.shape.dp_shard;
  p.tp = l.shape.tp;
  p.cp = l.shape.cp;
  p.ep = l.shape.ep;
  p.tp_sequence = l.tp_sequence && l.shape.tp > 1;
  p.pp_schedule = l.schedule;
  p.pp_virtual = l.virtual_stages;
  p.microbatches = l.microbatches;
  c.train.recompute = recompute_name(l.recompute);
  return c;
}

Layout layout_of_config(const RunConfig& cfg, int world) {
  const ParallelConfig& p = cfg.parallel;
  Layout l;
  l.shape = MeshShape::fit(world, int(p.pp), int(p.dp != 0 ? p.dp : p.dp_replicate), int(p.dp_shard), int(p.tp),
                           int(p.cp));
  l.shape.set_expert_parallel(int(p.ep));
  l.schedule = p.pp_schedule;
  l.microbatches = int(p.microbatches);
  l.virtual_stages = int(p.pp_virtual);
  l.recompute = cfg.train.recompute_mode();
  l.tp_sequence = p.tp_sequence;
  return l;
}

BatchSplit batch_split_of(const RunConfig& cfg, const MeshShape& shape) {
  return run_batch_split(cfg.train.global_batch, cfg.train.batch_size, cfg.train.grad_accum, shape.dp());
}

}  // namespace dtrain
