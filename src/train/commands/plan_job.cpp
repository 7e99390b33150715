// plan_job_command (see plan_job.hpp).
#include "train/commands/plan_job.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cstdio>

#include "core/atomic_file.hpp"
#include "core/output_path.hpp"
#include "train/commands/child_process.hpp"
#include "train/plan/calibrate.hpp"
#include "train/plan/layout_search.hpp"

namespace dtrain {

namespace {

constexpr double kGiB = double(1 << 30);

// --mesh's recompute=V, read as train.recompute reads it.
Recompute parse_recompute(const std::string& v) {
  RunConfig c;
  c.set("train.recompute", v, "--mesh");
  return c.train.recompute_mode();
}

// --mesh "pp=2,dp_shard=4,tp=2,sp=1,schedule=1f1b,m=8,v=1,recompute=selective,ep=1,cp=1,dp_replicate=1":
// sizes not named are 1, the rest as the config says ("config" alone: the config's own layout).
Layout parse_mesh(const std::string& text, const RunConfig& cfg, int world) {
  if (text == "config") return layout_of_config(cfg, world);
  Layout l;  // what --mesh does not say, as the config says it
  l.schedule = cfg.parallel.pp_schedule;
  l.microbatches = int(cfg.parallel.microbatches);
  l.virtual_stages = int(cfg.parallel.pp_virtual);
  l.recompute = cfg.train.recompute_mode();
  l.tp_sequence = cfg.parallel.tp_sequence;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    at = comma + 1;
    const size_t eq = item.find('=');
    require(eq != std::string::npos, "--mesh " + text + ": `" + item + "` is not name=value: write e.g. --mesh pp=2,dp_shard=4,tp=2");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    auto n = [&] {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      require(end && *end == 0 && x >= 0 && x <= (1 << 24), "--mesh " + text + ": " + k + " = `" + v + "` is not a count");
      return int(x);
    };
    if (k == "pp") l.shape.pp = n();
    else if (k == "dp_replicate" || k == "dp") l.shape.dp_replicate = n();
    else if (k == "dp_shard") l.shape.dp_shard = n();
    else if (k == "tp") l.shape.tp = n();
    else if (k == "cp") l.shape.cp = n();
    else if (k == "ep") l.shape.ep = n();
    else if (k == "sp") l.tp_sequence = n() != 0;
    else if (k == "m") l.microbatches = n();
    else if (k == "v") l.virtual_stages = n();
    else if (k == "schedule") l.schedule = v;
    else if (k == "recompute") l.recompute = parse_recompute(v);
    else
      throw Error("--mesh " + text + ": unknown `" + k +
                  "`: use pp, dp_replicate, dp_shard, cp, tp, ep, sp, schedule, m, v, recompute");
  }
  require(l.shape.size() == world, "--mesh " + text + " makes " + std::to_string(l.shape.size()) + " ranks, --world is " +
                                       std::to_string(world) + ": make the sizes multiply to the world");
  const int ep = l.shape.ep;
  l.shape.ep = 1;
  l.shape.set_expert_parallel(ep);
  return l;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / kGiB);
  return b;
}

Json layout_json(const PlannedLayout& p) {
  Json j;
  j["layout"] = p.layout.describe();
  j["pp"] = p.layout.shape.pp;
  j["dp_replicate"] = p.layout.shape.dp_replicate;
  j["dp_shard"] = p.layout.shape.dp_shard;
  j["cp"] = p.layout.shape.cp;
  j["tp"] = p.layout.shape.tp;
  j["ep"] = p.layout.shape.ep;
  if (!p.refused.empty()) {
    j["refused"] = p.refused;
    return j;
  }
  j["micro_batch"] = p.split.micro_batch;
  j["accum"] = p.split.accum;
  j["fits"] = p.fits;
  j["worst_rank"] = p.worst.rank;
  j["need_bytes"] = p.need_bytes;
  Json mem;
  p.worst.memory.add_to(mem);
  j["memory"] = mem;
  Json ranks = Json::array();  // every rank built: its planned parts
  for (const auto& [rank, account] : p.ranks) {
    Json r;
    account.add_to(r);
    r["rank"] = rank;
    ranks.push_back(r);
  }
  j["ranks"] = ranks;
  j["step_s"] = p.time.total();
  j["compute_s"] = p.time.compute;
  j["bubble_s"] = p.time.bubble;
  j["dp_s"] = p.time.data_parallel;
  j["tp_s"] = p.time.tensor_parallel;
  j["cp_s"] = p.time.context_parallel;
  j["ep_s"] = p.time.expert_parallel;
  j["optimizer_s"] = p.time.optimizer;
  j["kernel_s"] = p.worst.work.step.kernels;  // the worst rank's one step, by kernel
  j["tokens_per_s"] = p.tokens_per_s;
  j["mfu"] = p.mfu;
  return j;
}

void print_one(const PlannedLayout& p, const Hardware& h) {
  if (!p.refused.empty()) {
    std::printf("  the model cannot take it: %s\n", p.refused.c_str());
    return;
  }
  std::printf("  batch: %lld samples per rank and micro-step, %lld micro-steps\n", (long long)p.split.micro_batch,
              (long long)p.split.accum);
  std::printf("  memory of rank %d: %s of %s%s\n    %s + %.1f GiB the process's own\n", p.worst.rank,
              gib(p.need_bytes).c_str(), gib(h.memory_gib * kGiB).c_str(), p.fits ? "" : ": DOES NOT FIT",
              p.worst.memory.describe().c_str(), h.process_gib);
  std::printf("  step: %s\n  %.0f tokens/s, MFU %.1f%%\n", p.time.describe().c_str(), p.tokens_per_s, p.mfu * 100);
}

// What a training process holds besides its model, kernels' scratch and groups: a one-step run of a
// tiny model on the built-in corpus, read from its summary (start_rss_bytes).
double training_process_gib(int threads) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dtrain-calibrate-run-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string exe = fs::read_symlink("/proc/self/exe").string(), d = dir.string();
  const std::string fix = "run `dtrain train` once by hand to see what fails";
  write_file_atomic(d + "/tiny.toml", "[model]\nseq_len = 16\ndim = 32\nheads = 2\nlayers = 1\nff_dim = 64\n");
  std::string end = run_logged({exe, "data", "builtin", "--out", d + "/data"}, d + "/data.log", fix);
  if (end.empty())
    end = run_logged({exe, "train", "--config", d + "/tiny.toml", "--set", "data.dir=" + d + "/data", "--set", "train.max_steps=1", "--set",
                      "train.batch_size=2", "--set", "train.eval_every=0", "--set",
                      "train.threads=" + std::to_string(threads), "--run-dir", d + "/run"},
                     d + "/run.log", fix);
  double gib = 0.0;
  if (end.empty()) {
    const Json s = Json::parse(read_file(d + "/run/summary.json"));
    gib = s.value("start_rss_bytes", 0.0) / double(1 << 30);
  }
  fs::remove_all(dir);
  require(end.empty(), "dtrain plan --calibrate: a one-step training run ended with " + end + ": " + fix);
  return gib;
}

// --calibrate [--ranks-per-node R] [--threads T] [--save FILE]: this machine's profile, printed and saved.
int calibrate_command(const CommandArgs& a) {
  const std::string save = a.get("save");
  if (!save.empty()) check_output_file(save, "--save");
  const int ranks = int(a.integer("ranks-per-node", 1, 1, 4096));
  const int threads = int(a.integer("threads", std::max(1, omp_get_max_threads() / ranks), 1, 4096));
  Hardware h = calibrate_this_machine(ranks, threads);
  h.process_gib = training_process_gib(threads);
  std::printf("%s", hardware_toml(h).c_str());
  if (!save.empty()) {
    write_file_atomic(save, hardware_toml(h));
    std::printf("wrote %s (plan with it: dtrain plan --config C --hardware %s)\n", save.c_str(), save.c_str());
  }
  return 0;
}

// The search's result as JSON: the world, the machine, every layout planned (fitting first, fastest first).
Json search_json(const SearchResult& res, int world, const Hardware& h) {
  Json out;
  out["world"] = world;
  out["hardware"] = h.name;
  out["global_batch"] = res.global_batch;
  out["considered"] = res.considered;
  out["refused"] = res.refused;
  Json list = Json::array();
  for (const PlannedLayout& p : res.layouts) list.push_back(layout_json(p));
  out["layouts"] = list;
  return out;
}

// The best `top` layouts as a table, the best one's breakdown, why the others lost and how to see
// one; 1 when none fits.
int print_search(const SearchResult& res, const PlanJob& job, const Hardware& h, int world, int top,
                 const std::string& config, double seconds) {
  std::printf("%s on %d ranks of %s\nglobal batch %lld samples; %d layouts considered (%d the model cannot take) in %.1f s\n",
              job.kind->describe(job.cfg.model).c_str(), world, h.describe().c_str(), (long long)res.global_batch,
              res.considered, res.refused, seconds);
  const PlannedLayout* best = res.layouts.empty() || !res.layouts.front().fits ? nullptr : &res.layouts.front();
  if (!best) {
    std::printf("no layout fits: the least memory is %s (%s)\n",
                res.layouts.empty() ? "-" : gib(res.layouts.front().need_bytes).c_str(),
                res.layouts.empty() ? "-" : res.layouts.front().layout.describe().c_str());
    return 1;
  }
  std::printf("\n  #  %-52s %10s %10s %12s %6s\n", "layout", "memory", "step", "tokens/s", "MFU");
  for (int i = 0; i < top && i < int(res.layouts.size()) && res.layouts[size_t(i)].fits; ++i) {
    const PlannedLayout& p = res.layouts[size_t(i)];
    std::printf("%3d  %-52s %10s %8.1f ms %12.0f %5.1f%%\n", i + 1, p.layout.describe().c_str(), gib(p.need_bytes).c_str(),
                p.time.total() * 1e3, p.tokens_per_s, p.mfu * 100);
  }
  std::printf("\nbest: %s\n", best->layout.describe().c_str());
  print_one(*best, h);
  std::printf("\nwhy the others lost:\n");
  for (int i = 1; i < top && i < int(res.layouts.size()); ++i)
    std::printf("  %d. %s: %s\n", i + 1, res.layouts[size_t(i)].layout.describe().c_str(),
                res.layouts[size_t(i)].why_not(*best).c_str());
  int shown = 0;
  for (const PlannedLayout& p : res.layouts)
    if (!p.fits && p.refused.empty() && shown++ < 3)
      std::printf("  (does not fit) %s: %s\n", p.layout.describe().c_str(), p.why_not(*best).c_str());
  std::printf("see one with: dtrain plan --config %s --world %d --mesh %s\n", config.c_str(), world,
              best->layout.mesh_argument().c_str());
  return 0;
}

}  // namespace

int plan_job_command(const CommandArgs& a) {
  if (a.flag("calibrate")) return calibrate_command(a);
  RunConfig cfg;
  cfg.load_toml(a.need("config"));
  apply_sets(cfg, a);
  const int world = int(a.integer("world", 1, 1, 1 << 24));
  const Hardware h = load_hardware(a.get("hardware", "cpu"));
  const PlanJob job = plan_job(cfg);
  const bool json = a.flag("json");
  if (h.device == "cuda" && job.cfg.model.kind == "moe" && !json)
    std::printf("note: model.kind = moe runs on the CPU in this version (no CUDA mixture-of-experts kernels yet); "
                "the plan times its routing kernels by their bytes over %s's memory bandwidth\n", h.name.c_str());
  if (const std::string mesh = a.get("mesh"); !mesh.empty()) {
    const Layout l = parse_mesh(mesh, job.cfg, world);
    const PlannedLayout p = plan_layout(job, l, job_global_batch(job, world, &l), h);
    if (json) {
      std::printf("%s\n", layout_json(p).dump(2).c_str());
      return 0;
    }
    std::printf("%s on %d ranks of %s: global batch %lld\n%s\n", job.kind->describe(job.cfg.model).c_str(), world,
                h.name.c_str(), (long long)p.global_batch, l.describe().c_str());
    print_one(p, h);
    return p.refused.empty() && p.fits ? 0 : 1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const SearchResult res = search_layouts(job, world, h);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) {
    std::printf("%s\n", search_json(res, world, h).dump(2).c_str());
    return 0;
  }
  return print_search(res, job, h, world, int(a.integer("top", 5, 1, 1 << 20)), a.need("config"), seconds);
}

}  // namespace dtrain
