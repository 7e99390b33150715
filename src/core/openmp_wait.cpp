// Re-executes the program with OMP_WAIT_POLICY=PASSIVE when no wait policy is set (openmp_wait.hpp).
#include "core/openmp_wait.hpp"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace dtrain {

namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

void ensure_passive_openmp_wait(char** argv) {
  if (env("OMP_WAIT_POLICY") || env("GOMP_SPINCOUNT")) return;
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
  // The exec failed (no /proc): run on as we are, the policy unset for the children we start too.
  ::unsetenv("OMP_WAIT_POLICY");
}

std::string openmp_wait_policy() {
  if (const char* spin = env("GOMP_SPINCOUNT")) return std::string("spins up to ") + spin + " times, then sleeps (GOMP_SPINCOUNT)";
  if (const char* p = env("OMP_WAIT_POLICY")) {
    std::string v = p;
    for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (v == "passive") return "passive (sleeps when a parallel region ends)";
    if (v == "active") return "active (spins between parallel regions: OMP_WAIT_POLICY=ACTIVE)";
  }
  return "libgomp's default (spins, then sleeps)";
}

}  // namespace dtrain
