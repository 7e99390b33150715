// StepClock (see step_clock.hpp).
#include "train/plan/step_clock.hpp"

#include <algorithm>
#include <cmath>

#include "train/plan/step_time.hpp"

namespace dtrain {

std::string group_kind(const std::string& g) {
  if (g == "tp" || g == "pp" || g == "cp" || g == "ep") return g;
  return "dp";  // dp_replicate, dp_shard, dp, dp_shard_cp, dp_cp, expert_shard, expert_replicas
}

namespace {

// On the node's link where its all-reduce was measured: the measured time of moving as many bytes
// across the link (an all-reduce of B bytes between two ranks sends B per rank in two steps), with
// the latency of the ring's steps beyond or short of those two.
OpSeconds measured_seconds(Collective c, double bytes, int n, const Hardware& h, double lag) {
  const CollectiveShape k = collective_shape(c, n, "ring");  // (Gloo's, which the curve measured)
  auto seconds = [&](bool alone) {
    const double alpha = h.node_allreduce_seconds(1.0, alone) / 2.0;  // one step of the measured pair
    return std::max(alpha, h.node_allreduce_seconds(k.share * bytes, alone) + (k.steps - 2.0) * alpha);
  };
  return {seconds(true), seconds(false), lag, h.node_allreduce_steal(k.share * bytes)};
}

}  // namespace

double expected_max_of_normals(int n) {
  double sum = 0.0;
  const double dx = 0.01;
  for (double x = -8.0; x < 8.0; x += dx) {
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI), cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * pdf * std::pow(cdf, n - 1) * dx;
  }
  return sum;
}

double StepClock::expected_max_normal(int n) {
  if (auto it = max_normal_.find(n); it != max_normal_.end()) return it->second;
  return max_normal_[n] = expected_max_of_normals(n);
}

// A kernel's measured rate: its own, or (a profile measured without it) that of the kernel without
// dropout; null when neither was measured.
const double* StepClock::measured_rate(const std::string& name) const {
  if (auto it = h_.kernels.find(name); it != h_.kernels.end()) return &it->second;
  const size_t at = name.find(".dropout");
  if (at == std::string::npos) return nullptr;
  auto it = h_.kernels.find(name.substr(0, at) + name.substr(at + 8));
  return it == h_.kernels.end() ? nullptr : &it->second;
}

double StepClock::now() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_.end;
}

OpSeconds StepClock::seconds(const std::string& op, double bytes, const std::vector<int>& ranks, const std::string& group) {
  const int n = int(ranks.size());
  if (n <= 1) return {};
  const Collective c = op == "allreduce"                                 ? Collective::all_reduce
                       : op == "allgather" || op == "broadcast"          ? Collective::all_gather
                       : op == "reduce_scatter"                          ? Collective::reduce_scatter
                       : op == "all_to_all"                              ? Collective::all_to_all
                                                                         : Collective::p2p;
  // allgather and reduce_scatter are given the whole (gathered or scattered) bytes; the formulas
  // take the whole as well
  const Link& link = link_of(ranks, h_);
  // the ranks computed apart since they last met, each as unevenly as the profile's jitter says a
  // computation of that span varies
  double lag = 0.0;
  if (h_.jitter > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    const double apart = std::max(0.0, t_.end - met_at_), span = h_.jitter_span_s;
    lag = h_.jitter * expected_max_normal(n) * (span > 0 ? span * std::pow(apart / span, h_.jitter_growth) : apart);
    // on a node whose ranks share its cores, the late rank finishes with the cores its waiting group
    // leaves it: it and the node's ranks outside the group compute
    if (&link == &h_.intra && n <= h_.ranks_per_node) lag /= h_.shared_speed(double(h_.ranks_per_node - n + 1));
  }
  if (&link == &h_.intra && !h_.allreduce_bytes.empty()) return measured_seconds(c, bytes, n, h_, lag);
  const double s = collective_seconds(c, bytes, n, link, h_.algorithm);
  return {s, s, lag};
}

// Processor sharing: from its start to now the operation ran beside the computation, at its `beside`
// speed, slowing the computation by what that share of it takes of the cores (its `steal`); what is
// left of it the compute stream waits for, and it runs that part at its `alone` speed.
void StepClock::wait_until(double start, const OpSeconds& s, const std::string& group) {
  std::lock_guard<std::mutex> lock(mu_);
  const double beside = std::clamp(t_.end - start, 0.0, s.beside);
  const double left = s.beside > 0 ? 1.0 - beside / s.beside : 0.0, lost = s.steal * (1.0 - left);
  const double waited = std::max(0.0, start - t_.end) + left * s.alone;
  t_.waited[group_kind(group)] += lost + waited;
  t_.end += lost + waited;
  if (waited > 0) met_at_ = t_.end;  // it waited for the others: the ranks meet here
}

void StepClock::kernel(const KernelWork& w) {
  const std::string family = w.family;
  std::string name = w.name;
  if (w.flops > 0 && w.precision == Precision::bf16) name += ".bf16";
  const double streamed = w.bytes / (h_.memory_gbs * 1e9);
  double s = 0.0;
  if (const double* rate = measured_rate(name))  // measured: its own rate
    s = w.flops > 0 ? w.flops / (*rate * 1e12) : w.bytes / (*rate * 1e9);
  else if (family == "matmul")  // the slower of its products and its operands' traffic (a roofline)
    s = std::max(w.flops / (h_.matmul_rate({w.M, w.N, w.K, w.trans_a, w.trans_b, false, nullptr, w.precision}) * 1e12),
                 streamed);
  else if (family == "conv" || family == "classifier")
    s = std::max(w.flops / (h_.matmul_tflops(w.precision) * 1e12), streamed);
  else if (family == "attention")
    s = std::max(w.flops / (h_.attention_tflops(w.precision) * 1e12), streamed);
  else
    s = streamed;
  s += h_.launch_us * 1e-6;
  std::lock_guard<std::mutex> lock(mu_);
  t_.end += s;
  (family == "optimizer" ? t_.optimizer : t_.compute) += s;
  t_.kernels[name] += s;
}

StepClockTally StepClock::tally() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_;
}

}  // namespace dtrain
