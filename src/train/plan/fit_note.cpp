// fitting_layout_note (see fit_note.hpp).
#include "train/plan/fit_note.hpp"

#include <cstdio>

#include "kernels/device.hpp"
#include "train/plan/layout_search.hpp"
#include "train/report/memory_account.hpp"

namespace dtrain {

std::string fitting_layout_note(const RunConfig& cfg, int world, double bytes_per_rank, const std::string& profile) {
  try {
    Hardware h;
    try {
      h = load_hardware(profile);
    } catch (const Error&) {  // no profile at hand: any rates rank the layouts; memory decides what fits
      h.matmul_tflops_f32 = h.matmul_tflops_bf16 = 1.0;
      h.memory_gbs = 10.0;
    }
    h.memory_gib = bytes_per_rank / double(1 << 30);
    if (h.device == "cpu") h.process_gib = double(resident_bytes()) / double(1 << 30);  // (a GPU's: its CUDA context)
    if (profile == "cpu" && cfg.train.precision == "bf16") h.bf16_products = cpu_device().bf16_products();  // this CPU's
    h.ranks_per_node = std::max(h.ranks_per_node, 1);
    const PlanJob job = plan_job(cfg);
    const SearchResult res = search_layouts(job, world, h);
    if (res.layouts.empty() || !res.layouts.front().fits) return "";
    const PlannedLayout& best = res.layouts.front();
    char b[160];
    std::snprintf(b, sizeof b, "; the planner finds a layout of %d rank%s that fits: %s (%.1f GiB per rank of %.1f): ", world,
                  world == 1 ? "" : "s", best.layout.describe().c_str(), best.need_bytes / double(1 << 30), h.memory_gib);
    // the same global batch on the new layout's data-parallel ranks
    const std::string batch =
        cfg.train.global_batch > 0 ? "" : " --set train.global_batch=" + std::to_string(res.global_batch);
    return b + best.layout.sets() + batch + " (see `dtrain plan --world " + std::to_string(world) + "`, docs/planning.md)";
  } catch (const std::exception&) {
    return "";  // the message stands without it
  }
}

}  // namespace dtrain
