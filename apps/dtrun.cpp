// dtrun: launches a dtrain job's workers on this node (torchrun for dtrain). Thin: parses the
// options and runs the agent; a user error prints one line and exits with status 2.
#include <cstdio>

#include "core/error.hpp"
#include "launch/agent.hpp"

using namespace dtrain;

int main(int argc, char** argv) {
  try {
    LaunchOptions o = parse_launch_options(argc, argv);
    if (o.command.empty()) {
      std::fputs(kLaunchUsage, stdout);
      return 0;
    }
    for (const auto& note : o.notes) std::fprintf(stderr, "dtrun: note: %s\n", note.c_str());
    return run_agent(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrun: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrun: internal error: %s\n", e.what());
    return 3;
  }
}
