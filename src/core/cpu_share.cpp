// A rank's share of the CPUs: the affinity mask, the cgroup (v1 or v2) and the local rank count.
#include "core/cpu_share.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace dtrain {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

bool has_word(const std::string& list, const std::string& word) {
  for (const std::string& w : split(list, ','))
    if (w == word) return true;
  return false;
}

// Where a controller's hierarchy is mounted and the cgroup path of this process in it, for every
// mounted hierarchy ("" for cgroup v2).
struct Hierarchy {
  std::string mount;        // mount point
  std::string root;         // the mount's root inside the hierarchy
  std::string controllers;  // "cpu,cpuacct"; "" for v2
  bool v2 = false;
};

std::vector<Hierarchy> mounted_hierarchies() {
  std::vector<Hierarchy> out;
  std::istringstream in(read_text("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent dev root mountpoint options [optional…] - fstype source superoptions
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, mount, fstype, source, super;
    head >> id >> parent >> dev >> root >> mount;
    tail >> fstype >> source >> super;
    if (fstype == "cgroup2") out.push_back({mount, root, "", true});
    if (fstype == "cgroup") out.push_back({mount, root, super, false});
  }
  return out;
}

// The folder of this process's cgroup for a controller ("cpu", "cpuset"), or "".
std::string cgroup_dir(const std::vector<Hierarchy>& hs, const std::string& controller) {
  std::istringstream in(read_text("/proc/self/cgroup"));
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const bool v2 = line.substr(0, a) == "0" && ctl.empty();
    if (!v2 && !has_word(ctl, controller)) continue;
    for (const Hierarchy& h : hs) {
      if (h.v2 != v2 || (!v2 && !has_word(h.controllers, controller))) continue;
      std::string rel = path;
      if (h.root != "/" && rel.rfind(h.root, 0) == 0) rel = rel.substr(h.root.size());
      const std::string dir = h.mount + (rel == "/" ? "" : rel);
      // v2: one hierarchy for every controller; a controller not enabled has no files there
      return dir;
    }
  }
  return "";
}

// The smallest quota from this cgroup up to its hierarchy's mount point, in CPUs (0: none).
double quota_cpus(const std::vector<Hierarchy>& hs) {
  std::string dir = cgroup_dir(hs, "cpu");
  if (dir.empty()) return 0.0;
  std::string mount;
  for (const Hierarchy& h : hs)
    if (dir.rfind(h.mount, 0) == 0 && h.mount.size() > mount.size()) mount = h.mount;
  double best = 0.0;
  while (true) {
    double q = parse_cpu_max(read_text(dir + "/cpu.max"));
    if (q == 0.0) {  // v1
      const std::string quota = read_text(dir + "/cpu.cfs_quota_us"), period = read_text(dir + "/cpu.cfs_period_us");
      if (!quota.empty() && !period.empty()) {
        const double qu = std::atof(quota.c_str()), pe = std::atof(period.c_str());
        if (qu > 0 && pe > 0) q = qu / pe;
      }
    }
    if (q > 0 && (best == 0.0 || q < best)) best = q;
    if (dir.size() <= mount.size()) break;
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash < mount.size()) break;
    dir = dir.substr(0, slash);
  }
  return best;
}

int cpuset_cpus(const std::vector<Hierarchy>& hs) {
  const std::string dir = cgroup_dir(hs, "cpuset");
  if (dir.empty()) return 0;
  for (const char* file : {"/cpuset.cpus.effective", "/cpuset.effective_cpus", "/cpuset.cpus"}) {
    const std::vector<int> cpus = parse_cpu_list(read_text(dir + file));
    if (!cpus.empty()) return int(cpus.size());
  }
  return 0;
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '\n' || c == ' '; }), t.end());
  if (t.empty()) return out;
  for (const std::string& part : split(t, ',')) {
    int lo = 0, hi = 0;
    char extra = 0;
    if (std::sscanf(part.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2) {
    } else if (std::sscanf(part.c_str(), "%d%c", &lo, &extra) == 1) {
      hi = lo;
    } else {
      return {};
    }
    if (lo < 0 || hi < lo || hi - lo > 65536) return {};
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
    i = j + 1;
  }
  return out;
}

double parse_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0.0;
  const double q = std::atof(quota.c_str());
  return q > 0 ? q / period : 0.0;
}

CpuFacts read_cpu_facts() {
  CpuFacts f;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) f.mask.push_back(c);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (f.mask.empty())
    for (int c = 0; c < std::max(1L, online); ++c) f.mask.push_back(c);
  const std::vector<Hierarchy> hs = mounted_hierarchies();
  f.pool = cpuset_cpus(hs);
  if (f.pool == 0) f.pool = int(std::max(1L, online));
  f.quota_cpus = quota_cpus(hs);
  return f;
}

CpuShare share_of(const CpuFacts& facts, int local_ranks, bool shared) {
  const int L = std::max(1, local_ranks);
  const int M = std::max<int>(1, int(facts.mask.size()));
  const int pool = std::max(facts.pool, M);
  CpuShare s;
  s.own_mask = !shared && L > 1 && M * L <= pool;
  const int by_mask = s.own_mask ? M : std::max(1, M / L);
  s.why = plural(M, "CPU", "CPUs") + " in the affinity mask";
  if (L > 1) s.why += s.own_mask ? " (this rank's own)" : ", shared by " + std::to_string(L) + " local ranks";
  s.threads = by_mask;
  if (facts.quota_cpus > 0) {
    const int by_quota = std::max(1, int(std::floor(facts.quota_cpus / L + 1e-9)));
    char q[64];
    std::snprintf(q, sizeof q, "%.2g", facts.quota_cpus);
    s.why += std::string("; cgroup CPU quota ") + q + (L > 1 ? " for " + std::to_string(L) + " local ranks" : "");
    s.threads = std::min(s.threads, by_quota);
  }
  return s;
}

std::vector<int> cpus_of_worker(const std::vector<int>& mask, int local_rank, int workers) {
  if (mask.empty() || workers < 1) return {};
  const size_t M = mask.size(), W = size_t(workers), l = size_t(local_rank) % W;
  if (M < W) return {mask[l % M]};
  const size_t k = M / W;
  return std::vector<int>(mask.begin() + std::ptrdiff_t(l * k), mask.begin() + std::ptrdiff_t(l * k + k));
}

}  // namespace dtrain
