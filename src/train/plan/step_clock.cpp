// StepClock (see step_clock.hpp).
#include "train/plan/step_clock.hpp"

#include <algorithm>

#include "train/plan/step_time.hpp"

namespace dtrain {

std::string group_kind(const std::string& g) {
  if (g == "tp" || g == "pp" || g == "cp" || g == "ep") return g;
  return "dp";  // dp_replicate, dp_shard, dp, dp_shard_cp, dp_cp, expert_shard, expert_replicas
}

namespace {

// On the node's link where its all-reduce was measured: the measured time of moving as many bytes
// across the link (an all-reduce of B bytes between two ranks sends B per rank), and the latency of
// the ring's further steps for a larger group.
double measured_seconds(Collective c, double bytes, int n, const Hardware& h) {
  const CollectiveShape k = collective_shape(c, n, "ring");  // (Gloo's, which the curve measured)
  const double alpha = h.node_allreduce_seconds(1.0) / 2.0;   // one step of the measured pair
  return h.node_allreduce_seconds(k.share * bytes) + std::max(0.0, k.steps - 2.0) * alpha;
}

}  // namespace

double StepClock::now() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_.end;
}

double StepClock::seconds(const std::string& op, double bytes, const std::vector<int>& ranks, const std::string& group) {
  const int n = int(ranks.size());
  if (n <= 1) return 0.0;
  const Collective c = op == "allreduce"                                 ? Collective::all_reduce
                       : op == "allgather" || op == "broadcast"          ? Collective::all_gather
                       : op == "reduce_scatter"                          ? Collective::reduce_scatter
                       : op == "all_to_all"                              ? Collective::all_to_all
                                                                         : Collective::p2p;
  // allgather and reduce_scatter are given the whole (gathered or scattered) bytes; the formulas
  // take the whole as well
  const Link& link = link_of(ranks, h_);
  return &link == &h_.intra && !h_.allreduce_bytes.empty() ? measured_seconds(c, bytes, n, h_)
                                                           : collective_seconds(c, bytes, n, link, h_.algorithm);
}

void StepClock::wait_until(double start, double end, const std::string& group) {
  std::lock_guard<std::mutex> lock(mu_);
  // the part that ran beside the computation slowed it by what it takes of the cores (comm_steal);
  // the rest the compute stream waits for
  const double beside = std::max(0.0, std::min(end, t_.end) - start), lost = h_.comm_steal * beside;
  const double waited = std::max(0.0, end - t_.end);
  t_.waited[group_kind(group)] += lost + waited;
  t_.end += lost + waited;
}

void StepClock::kernel(const KernelWork& w) {
  const std::string family = w.family;
  std::string name = w.name;
  if (w.flops > 0 && w.precision == Precision::bf16) name += ".bf16";
  const double streamed = w.bytes / (h_.memory_gbs * 1e9);
  double s = 0.0;
  if (auto it = h_.kernels.find(name); it != h_.kernels.end())  // measured: its own rate
    s = w.flops > 0 ? w.flops / (it->second * 1e12) : w.bytes / (it->second * 1e9);
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
}

StepClockTally StepClock::tally() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_;
}

}  // namespace dtrain
