// The planner's search (see layout_search.hpp).
#include "train/plan/layout_search.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <cstdio>

namespace dtrain {

namespace {

constexpr double kGiB = double(1 << 30);

std::vector<int> powers_of_two_dividing(int n, int most) {
  std::vector<int> out;
  for (int k = 1; k <= most && n % k == 0; k *= 2) out.push_back(k);
  return out;
}

// The model's hidden units (its blocks): the most pipeline stages it can be cut into.
int hidden_units(const PlanJob& job) {
  const Json& v = job.cfg.model.values;
  return v.contains("layers") ? int(v["layers"].get<int64_t>()) : 2;
}

}  // namespace

int64_t job_global_batch(const PlanJob& job, int world, const Layout* given) {
  if (job.cfg.train.global_batch > 0) return job.cfg.train.global_batch;
  const int dp = given ? given->shape.dp() : layout_of_config(job.cfg, world).shape.dp();
  return job.cfg.train.batch_size * job.cfg.train.grad_accum * dp;
}

std::string PlannedLayout::why_not(const PlannedLayout& best) const {
  char b[200];
  if (!refused.empty()) return refused;
  if (!fits) {
    std::snprintf(b, sizeof b, "needs %.1f GiB on rank %d", need_bytes / kGiB, worst.rank);
    return b;
  }
  const double slower = time.total() / best.time.total() - 1.0;
  std::snprintf(b, sizeof b, "%.0f%% slower: %s", slower * 100, time.largest_overhead().c_str());
  return b;
}

PlannedLayout plan_layout(const PlanJob& job, const Layout& layout, int64_t global_batch, const Hardware& h) {
  PlannedLayout p;
  p.layout = layout;
  p.global_batch = global_batch;
  PlanJob sized = job;
  sized.cfg.train.global_batch = global_batch;
  try {
    std::vector<RankBuild> stages;  // one per pipeline rank, for the time model
    for (int r : distinct_ranks(layout.shape)) {
      RankBuild b = build_rank(sized, layout, r, h);
      p.ranks.push_back({r, b.memory});
      const double need = double(b.memory.total()) + h.process_gib * kGiB;
      if (need > p.need_bytes || stages.empty()) {
        p.need_bytes = need;
        p.worst = b;
      }
      if (b.coord.tp == 0) stages.push_back(std::move(b));
    }
    p.split = batch_split_of(with_layout(sized, layout), layout.shape);
    p.fits = p.need_bytes <= h.memory_gib * kGiB;
    p.time = step_time(layout, stages, h);
  } catch (const Error& e) {  // a layout the model cannot take (what must divide, a cut, the batch)
    p.refused = e.what();
    return p;
  }
  const double tokens = double(global_batch) * double(job.kind->sample_shape(job.cfg.model).targets);
  p.tokens_per_s = tokens / p.time.total();
  const Precision computed = h.bf16_products ? job.precision : Precision::f32;  // (no bf16 products: f32)
  const double peak = h.peak_tflops(computed) * 1e12 * double(layout.shape.size());
  p.mfu = double(global_batch) * job.flops_per_sample / p.time.total() / peak;
  return p;
}

namespace {

// The meshes, schedules and micro-batch counts of `world` ranks worth planning (recompute is tried
// per layout: candidates() leaves it none).
std::vector<Layout> candidates(const PlanJob& job, int world, int64_t global_batch, const Hardware& h) {
  std::vector<Layout> out;
  const int node = std::max(1, std::min(h.ranks_per_node, world));
  const int layers = hidden_units(job);
  const int64_t experts =
      job.cfg.model.kind == "moe" && job.cfg.model.values.contains("experts") ? job.cfg.model.values["experts"].get<int64_t>() : 1;
  for (int tp : powers_of_two_dividing(world, node))
    // context parallel's ring and all-to-all attention run on the CPU only in this version
    for (int cp : powers_of_two_dividing(world / tp, h.device == "cuda" ? 1 : node / tp))
      for (int pp : powers_of_two_dividing(world / tp / cp, layers)) {
        const int dp = world / tp / cp / pp;
        if (global_batch % dp != 0) continue;
        // data parallel: replicated, fully sharded, or sharded within a node and replicated across
        std::vector<std::pair<int, int>> dps = {{dp, 1}};
        if (dp > 1) dps.push_back({1, dp});
        const int in_node = std::max(1, node / (tp * cp));
        if (dp > in_node && in_node > 1 && dp % in_node == 0) dps.push_back({dp / in_node, in_node});
        std::vector<std::pair<std::string, int>> schedules = {{"1f1b", 1}};
        if (pp > 1 && layers % (2 * pp) == 0) schedules.push_back({"interleaved-1f1b", 2});
        const int64_t per_rank = global_batch / dp;
        std::vector<int> micro = {0};
        if (pp > 1) {
          micro.clear();
          for (int m = pp; m <= per_rank && m <= 8 * pp; m *= 2) micro.push_back(m);
        }
        for (auto [replicas, shards] : dps)
          for (const auto& [schedule, v] : schedules)
            for (int m : micro) {
              Layout l;
              l.shape = {pp, replicas, shards, tp, cp};
              for (int k = shards * cp; k > 1; --k)  // the experts over as many ranks of dp_shard × cp as divide them
                if ((shards * cp) % k == 0 && experts % k == 0) {
                  l.shape.ep = k;
                  break;
                }
              l.schedule = schedule;
              l.virtual_stages = v;
              l.microbatches = m;
              l.tp_sequence = tp > 1;
              out.push_back(l);
            }
      }
  return out;
}

// One candidate without recompute, then with more only while it does not fit (more recompute is only
// slower); every plan made, in that order.
std::vector<PlannedLayout> plan_candidate(const PlanJob& job, Layout l, int64_t global_batch, const Hardware& h) {
  std::vector<PlannedLayout> out;
  for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
    l.recompute = rc;
    out.push_back(plan_layout(job, l, global_batch, h));
    if (!out.back().refused.empty() || out.back().fits) break;  // recompute will not make the model take it
  }
  return out;
}

}  // namespace

SearchResult search_layouts(const PlanJob& job, int world, const Hardware& h) {
  SearchResult res;
  res.global_batch = job_global_batch(job, world);
  const std::vector<Layout> todo = candidates(job, world, res.global_batch, h);
  // planned on every core, each candidate's plans kept in its place (the result is the same at any count)
  std::vector<std::vector<PlannedLayout>> done(todo.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failed;  // the first failure of any thread (memory, threads), thrown after all have joined
  std::mutex mu;
  auto work = [&] {
    try {
      for (size_t i = next++; i < todo.size(); i = next++) done[i] = plan_candidate(job, todo[i], res.global_batch, h);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed) failed = std::current_exception();
      next = todo.size();
    }
  };
  const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // no more threads to be had: plan on those there are
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (failed) std::rethrow_exception(failed);
  for (std::vector<PlannedLayout>& plans : done)
    for (PlannedLayout& p : plans) {
      ++res.considered;
      res.refused += !p.refused.empty();
      if (p.refused.empty() || p.layout.recompute == Recompute::none) res.layouts.push_back(std::move(p));
    }
  std::stable_sort(res.layouts.begin(), res.layouts.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    const int ra = !a.refused.empty() ? 2 : a.fits ? 0 : 1, rb = !b.refused.empty() ? 2 : b.fits ? 0 : 1;
    if (ra != rb) return ra < rb;
    if (ra == 0) return a.time.total() < b.time.total();
    return a.need_bytes < b.need_bytes;
  });
  return res;
}

}  // namespace dtrain
