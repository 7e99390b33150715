// GPU placement checks (see gpu_placement.hpp).
#include "kernels/gpu_placement.hpp"

#include <map>
#include <set>

#include "core/error.hpp"
#include "core/json.hpp"

namespace dtrain {

namespace {

std::string join(const std::vector<std::string>& parts, const std::string& last_sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += i + 1 == parts.size() ? last_sep : ", ";
    out += parts[i];
  }
  return out;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::vector<std::string> s;
  for (int r : ranks) s.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(s, " and ");
}

// "GPU 2 (0000:1b:00.0)": its index as `seen_by` sees it, if it does.
std::string gpu_name(const std::string& id, const RankGpus& seen_by) {
  for (size_t i = 0; i < seen_by.visible.size(); ++i)
    if (seen_by.visible[i] == id) return "GPU " + std::to_string(i) + " (" + id + ")";
  return "GPU " + id;
}

// Ranks sorted by host, each host's in rank order.
std::map<std::string, std::vector<const RankGpus*>> by_host(const std::vector<RankGpus>& ranks) {
  std::map<std::string, std::vector<const RankGpus*>> hosts;
  for (const RankGpus& r : ranks) hosts[r.host].push_back(&r);
  return hosts;
}

std::string sharing(const std::string& host, const std::vector<const RankGpus*>& on_host) {
  std::map<std::string, std::vector<int>> users;
  std::set<std::string> visible;
  for (const RankGpus* r : on_host) {
    users[r->visible[size_t(r->chosen)]].push_back(r->rank);
    visible.insert(r->visible.begin(), r->visible.end());
  }
  for (const auto& [id, ranks] : users) {
    if (ranks.size() < 2) continue;
    const size_t n = visible.size(), m = on_host.size();
    return ranks_text(ranks) + " on " + host + " would share " + gpu_name(id, *on_host.front()) + " (" +
           std::to_string(n) + " GPU" + (n == 1 ? "" : "s") + " for " + std::to_string(m) +
           " ranks on the node): start one rank per GPU (dtrun --nproc-per-node " + std::to_string(n) +
           ", or srun --ntasks-per-node " + std::to_string(n) +
           "), or allow it with --set train.share_gpus=true (NCCL may still refuse two ranks on one GPU)";
  }
  return "";
}

std::string idle(const std::string& host, const std::vector<const RankGpus*>& on_host) {
  std::set<std::string> used, seen;
  std::vector<std::string> order;  // visible ids, first seen first
  int slurm = -1;
  for (const RankGpus* r : on_host) {
    used.insert(r->visible[size_t(r->chosen)]);
    for (const std::string& id : r->visible)
      if (seen.insert(id).second) order.push_back(id);
    slurm = std::max(slurm, r->slurm_gpus_on_node);
  }
  std::vector<std::string> idle_names;
  for (const std::string& id : order)
    if (!used.count(id)) idle_names.push_back(gpu_name(id, *on_host.front()));
  const size_t m = on_host.size();
  const std::string ranks = std::to_string(m) + " rank" + (m == 1 ? "" : "s");
  const std::string verb = m == 1 ? " uses " : " use ";
  const std::string fix = "start one rank per GPU (dtrun --nproc-per-node N, or srun --ntasks-per-node N with N = "
                          "the node's GPUs)";
  if (!idle_names.empty())
    return host + ": " + join(idle_names, " and ") + (idle_names.size() == 1 ? " is" : " are") + " idle: " + ranks +
           verb + std::to_string(used.size()) + " of the " + std::to_string(order.size()) +
           " GPUs visible; " + fix;
  if (slurm > int(order.size()))
    return host + ": SLURM gives this node " + std::to_string(slurm) + " GPUs but its " + ranks + " see " +
           std::to_string(order.size()) + ": " + std::to_string(slurm - int(order.size())) + " idle; " + fix;
  return "";
}

// Ranks whose train.device resolved otherwise than rank 0's: "" when they all agree.
std::string disagreement(const std::vector<RankGpus>& ranks) {
  std::vector<int> other;
  for (const RankGpus& r : ranks)
    if ((r.device == "cpu") != (ranks.front().device == "cpu")) other.push_back(r.rank);
  if (other.empty()) return "";
  const RankGpus& o = ranks[size_t(other.front())];
  return "train.device = auto chose " + ranks.front().device + " on rank 0 (" + ranks.front().host + ", " +
         ranks.front().why + ") but " + o.device + " on " + ranks_text(other) + " (" + o.host + ", " + o.why +
         "): give every node GPUs, or set train.device = cpu";
}

}  // namespace

GpuPlacement check_gpu_placement(const std::vector<RankGpus>& ranks, bool share_allowed) {
  GpuPlacement out;
  if (ranks.empty()) return out;
  out.refusal = disagreement(ranks);
  if (!out.refusal.empty() || ranks.front().device == "cpu") return out;  // agreed on the CPU: nothing to place
  for (const RankGpus& r : ranks) {
    if (r.error.empty()) continue;
    out.refusal = (ranks.size() > 1 ? "rank " + std::to_string(r.rank) + " on " + r.host + ": " : "") + r.error;
    return out;
  }
  for (const auto& [host, on_host] : by_host(ranks)) {
    for (const RankGpus* r : on_host)
      require(r->chosen >= 0 && size_t(r->chosen) < r->visible.size(),
              "rank " + std::to_string(r->rank) + " on " + host + " chose GPU " + std::to_string(r->chosen) +
                  " of the " + std::to_string(r->visible.size()) + " it sees: use cuda:0..cuda:" +
                  std::to_string(int(r->visible.size()) - 1) + " or cuda");
    const std::string shared = sharing(host, on_host);
    if (!shared.empty() && !share_allowed && out.refusal.empty()) out.refusal = shared;
    const std::string line = idle(host, on_host);
    if (!line.empty()) out.warnings.push_back({on_host.front()->rank, line});
  }
  return out;
}

int gpu_index_for(const std::string& device, int local_rank, int count) {
  if (device.rfind("cuda:", 0) == 0) {
    const std::string n = device.substr(5);
    const bool digits = !n.empty() && n.size() <= 6 && n.find_first_not_of("0123456789") == std::string::npos;
    return digits ? std::stoi(n) : -1;
  }
  return count > 0 ? local_rank % count : -1;
}

std::string encode_rank_gpus(const RankGpus& r) {
  return Json{{"rank", r.rank}, {"host", r.host}, {"visible", r.visible}, {"chosen", r.chosen},
              {"slurm", r.slurm_gpus_on_node}, {"device", r.device}, {"why", r.why}, {"error", r.error}}
      .dump();
}

RankGpus decode_rank_gpus(const std::string& text) {
  const Json j = parse_json(text, "a rank's GPU view");
  RankGpus r;
  r.rank = j.at("rank").get<int>();
  r.host = j.at("host").get<std::string>();
  r.visible = j.at("visible").get<std::vector<std::string>>();
  r.chosen = j.at("chosen").get<int>();
  r.slurm_gpus_on_node = j.at("slurm").get<int>();
  r.device = j.at("device").get<std::string>();
  r.why = j.at("why").get<std::string>();
  r.error = j.at("error").get<std::string>();
  return r;
}

}  // namespace dtrain
