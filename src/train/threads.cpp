// The OpenMP thread count of a command and the line describing every rank's threads and CPUs.
#include "train/threads.hpp"

#include <omp.h>

#include <climits>
#include <cstdlib>
#include <optional>
#include <map>

#include "comm/env.hpp"
#include "core/cpu_share.hpp"
#include "core/host_name.hpp"
#include "core/limits.hpp"
#include "core/openmp_wait.hpp"
#include "core/whole_number.hpp"

namespace dtrain {

namespace {
std::string g_source = "OpenMP's default";
}

int configure_threads(int64_t threads, const std::string& setting) {
  require_thread_count(threads, setting);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (threads > 0) {
    omp_set_num_threads(int(threads));
    g_source = setting;
  } else if (omp && *omp) {
    // Read here, not left to libgomp (which takes "0", "-1" or "abc" as its default and wraps 1e12): its
    // first number (a list gives nested levels' counts), and OMP_NUM_THREADS=100000 would make
    // libgomp fail (or crawl) at the first parallel region.
    const std::string text = omp, first = text.substr(0, text.find(','));
    const std::optional<int64_t> n = parse_whole(first, 1, INT32_MAX);
    require(n.has_value(), "OMP_NUM_THREADS=" + text + " is not a thread count: set a whole number from 1 (e.g. "
                           "OMP_NUM_THREADS=4), or unset it to have dtrain choose");
    require_thread_count(*n, "OMP_NUM_THREADS");
    const char* why = std::getenv("DTRAIN_THREADS_WHY");  // dtrun says how it chose
    g_source = std::string("OMP_NUM_THREADS") + (why && *why ? ", " + std::string(why) : "");
  } else {
    const CpuShare share = share_of(read_cpu_facts(), detect_env().local_world_size);
    omp_set_num_threads(share.threads);
    g_source = share.why;
  }
  return omp_get_max_threads();
}

const std::string& thread_source() { return g_source; }

std::string describe_threads(World& world) {
  // "THREADS HOST CPUS" of every rank, in one collective
  const std::string mine =
      std::to_string(omp_get_max_threads()) + " " + host_name() + " " + format_cpu_list(read_cpu_facts().mask);
  const std::vector<std::string> all = world.allgather_text(mine, 192);
  std::map<int, int> counts;  // threads → ranks
  for (const std::string& s : all) ++counts[std::atoi(s.c_str())];
  std::string line = "threads: ";
  if (counts.size() == 1) {
    line += std::to_string(counts.begin()->first) + (world.size() > 1 ? " per rank" : "");
  } else {
    for (const auto& [t, n] : counts) line += (line.size() > 9 ? ", " : "") + std::to_string(t) + " on " + std::to_string(n) + " ranks";
  }
  line += " (" + g_source + "); OpenMP " + openmp_wait_policy() + "\nCPUs:";
  // per host: "host: rank 0 on 0, rank 1 on 1"; the first 16 ranks, then a count
  std::string host;
  for (int r = 0; r < world.size() && r < 16; ++r) {
    const std::string& s = all[size_t(r)];
    const size_t a = s.find(' '), b = s.find(' ', a + 1);
    const std::string cpus = s.substr(b + 1);
    if (s.substr(a + 1, b - a - 1) != host) {
      host = s.substr(a + 1, b - a - 1);
      line += (r ? "; " : " ") + host + ":";
    } else {
      line += ",";
    }
    line += " rank " + std::to_string(r) + " on " + cpus;
  }
  if (world.size() > 16) line += "; … and " + std::to_string(world.size() - 16) + " more ranks";
  return line;
}

}  // namespace dtrain
