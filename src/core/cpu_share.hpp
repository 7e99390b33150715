// How many threads a rank should run: the CPUs this process may use (its affinity mask, its
// cgroup's cpuset and CPU quota) divided among the ranks that share them on this node.
#pragma once
#include <string>
#include <vector>

namespace dtrain {

// What the system says about this process's CPUs.
struct CpuFacts {
  std::vector<int> mask;    // the CPUs of its affinity mask
  int pool = 0;             // CPUs its cgroup's cpuset holds (else the CPUs online)
  double quota_cpus = 0.0;  // the cgroup's CPU quota in CPUs (quota / period); 0: none
};
CpuFacts read_cpu_facts();

// A rank's share and how it was found.
struct CpuShare {
  int threads = 1;
  bool own_mask = false;  // the mask is this rank's alone (a launcher bound it): not divided
  std::string why;        // "2 CPUs in the affinity mask, shared by 2 local ranks"
};
// `local_ranks`: the ranks of this job on this node (dtrun, srun and mpirun say how many). A mask
// whose CPUs times local_ranks fit in the pool is taken as the rank's own (srun --cpu-bind, dtrun
// --bind cores, mpirun's binding) unless `shared` says it is not (dtrun dividing its own mask among
// its workers); otherwise the local ranks share it. A quota is shared likewise.
CpuShare share_of(const CpuFacts& facts, int local_ranks, bool shared = false);

// The CPUs of worker `local_rank` of `workers` pinned within `mask` (dtrun --bind cores): equal
// consecutive shares of the mask (what does not divide evenly stays unused); with fewer CPUs than
// workers, one CPU each, taken in turn.
std::vector<int> cpus_of_worker(const std::vector<int>& mask, int local_rank, int workers);

// "0-3,8,10-11" ↔ {0,1,2,3,8,10,11}. parse_cpu_list returns {} for text it cannot read.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cpus);
// cgroup v2 `cpu.max` ("max 100000", "150000 100000") → CPUs (0: no quota or unreadable).
double parse_cpu_max(const std::string& text);

}  // namespace dtrain
