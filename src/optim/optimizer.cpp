// Optimizer state, schedules and updates (see optimizer.hpp); update math in kernels/cpu/optimizer.
#include "optim/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace dtrain {

std::vector<ParamShard> unit_shards(const std::vector<Unit*>& units) {
  std::vector<ParamShard> s;
  for (Unit* u : units) s.push_back({u->param_data(), u->grad_data(), u->numel(), u->param_bf16()});
  return s;
}

void OptimizerConfig::validate() const {
  require(name == "adamw" || name == "sgd",
          "optim.name = \"" + name + "\" is unknown: use \"adamw\" or \"sgd\"");
  require(lr > 0.0f && std::isfinite(lr),
          "train.lr = " + std::to_string(lr) + " must be positive: use e.g. --set train.lr=0.002");
  require(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
          "optim.beta1/beta2 must lie in [0, 1): use e.g. 0.9 and 0.999");
  require(eps > 0, "optim.eps must be positive: use e.g. 1e-8");
  require(weight_decay >= 0, "optim.weight_decay must not be negative: use e.g. 0.01");
  require(grad_clip >= 0, "optim.grad_clip must not be negative: use 0 (off) or e.g. 1.0");
  require(schedule == "constant" || schedule == "cosine" || schedule == "linear",
          "optim.schedule = \"" + schedule + "\" is unknown: use constant, cosine or linear");
  require(warmup_steps >= 0, "optim.warmup_steps must not be negative");
}

Optimizer::Optimizer(const OptimizerConfig& c, std::vector<ParamShard> shards, ComputeDevice& device)
    : c_(c), shards_(std::move(shards)), dev_(device), norm_sq_(device, sizeof(double) * std::max<size_t>(shards_.size(), 1)),
      squares_(shards_.size()) {
  c_.validate();
  for (size_t i = 0; i < shards_.size(); ++i) all_.push_back(i);
  for (const auto& s : shards_) {
    m_.emplace_back(dev_, sizeof(float) * s.numel);
    if (c_.name == "adamw") v_.emplace_back(dev_, sizeof(float) * s.numel);
  }
}

float Optimizer::lr_at(int64_t step, int64_t total) const {
  if (c_.warmup_steps > 0 && step < c_.warmup_steps)
    return c_.lr * float(step + 1) / float(c_.warmup_steps);
  if (c_.schedule == "constant" || total <= c_.warmup_steps) return c_.lr;
  const double t = double(step - c_.warmup_steps) / double(std::max<int64_t>(1, total - c_.warmup_steps));
  const double floor = c_.min_lr_ratio;
  const double f = c_.schedule == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, t))) : 1.0 - std::min(1.0, t);
  return float(c_.lr * (floor + (1.0 - floor) * f));
}

int64_t Optimizer::state_bytes() const {
  int64_t n = 0;
  for (const Buffer& b : m_) n += int64_t(b.size());
  for (const Buffer& b : v_) n += int64_t(b.size());
  return n;
}

double Optimizer::grad_sumsq() { return grad_sumsq(all_); }

double Optimizer::grad_sumsq(const std::vector<size_t>& only) {
  square_grads(only);
  return squared_grads_total(only);
}

void Optimizer::square_grads(const std::vector<size_t>& only) {
  double* slots = static_cast<double*>(norm_sq_.data());
  for (size_t i : only) {
    dev_.zero(slots + i, sizeof(double));
    dev_.sumsq(shards_[i].grad, shards_[i].numel, slots + i);
  }
}

double Optimizer::squared_grads_total(const std::vector<size_t>& only) {
  dev_.download(squares_.data(), norm_sq_.data(), squares_.size() * sizeof(double));
  double s = 0.0;
  for (size_t i : only) s += squares_[i];
  return s;
}

void Optimizer::scale_grads(float f) {
  for (const auto& sh : shards_) dev_.scale(sh.grad, f, sh.numel);
}

void Optimizer::step(float lr) {
  begin_step();
  update(lr);
}

void Optimizer::update(float lr, const std::vector<size_t>& only) {
  for (size_t i : only) {
    const auto& s = shards_[i];
    if (c_.name == "adamw")
      dev_.adamw_update(s.param, s.grad, m_[i].f32(), v_[i].f32(), s.numel,
                   {lr, c_.beta1, c_.beta2, c_.eps, c_.weight_decay, step_});
    else
      dev_.sgd_update(s.param, s.grad, m_[i].f32(), s.numel, {lr, c_.momentum, c_.weight_decay, step_ == 1});
    if (s.bf16) dev_.to_bf16(s.param, s.bf16, s.numel);
  }
}

std::vector<Optimizer::StateView> Optimizer::state() {
  const bool host = dev_.host_accessible();
  if (!host && host_m_.empty()) {
    for (const auto& b : m_) host_m_.emplace_back(host_memory(), b.size());
    for (const auto& b : v_) host_v_.emplace_back(host_memory(), b.size());
  }
  std::vector<StateView> out;
  for (size_t i = 0; i < shards_.size(); ++i) {
    float* m = host ? m_[i].f32() : host_m_[i].f32();
    if (!host) dev_.download(m, m_[i].data(), m_[i].size());
    const std::string first = c_.name == "adamw" ? "exp_avg" : "momentum";
    out.push_back({first + "." + std::to_string(i), first, i, m, shards_[i].numel});
    if (c_.name != "adamw") continue;
    float* v = host ? v_[i].f32() : host_v_[i].f32();
    if (!host) dev_.download(v, v_[i].data(), v_[i].size());
    out.push_back({"exp_avg_sq." + std::to_string(i), "exp_avg_sq", i, v, shards_[i].numel});
  }
  return out;
}

void Optimizer::upload_state() {
  if (dev_.host_accessible()) return;
  for (size_t i = 0; i < m_.size(); ++i) dev_.upload(m_[i].data(), host_m_[i].data(), m_[i].size());
  for (size_t i = 0; i < v_.size(); ++i) dev_.upload(v_[i].data(), host_v_[i].data(), v_[i].size());
  dev_.synchronize();
}

}  // namespace dtrain
