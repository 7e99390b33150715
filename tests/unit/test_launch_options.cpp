// dtrun's command line: every number is range-checked where it is parsed, and a refused option or
// value is one line naming it and the fix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_of.hpp"
#include "launch/options.hpp"

using namespace dtrain;

namespace {

LaunchOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dtrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_launch_options(int(argv.size()), argv.data());
}

std::string refusal(const std::vector<std::string>& args) {
  return error_of([&] { parse(args); });
}

}  // namespace

TEST(LaunchOptions, NumbersAreRangeChecked) {
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{"--nproc-per-node", "0", "p"}, "--nproc-per-node '0' is not a whole number from 1 to 4096"},
      {{"--nproc-per-node", "16777215", "p"}, "--nproc-per-node '16777215' is not a whole number from 1 to 4096"},
      {{"--nproc-per-node=2x", "p"}, "--nproc-per-node '2x'"},
      {{"--nnodes", "0", "p"}, "--nnodes '0' is not a whole number from 1 to 65536"},
      {{"--nnodes", "2", "--node-rank", "-1", "p"}, "--node-rank '-1' is not a whole number from 0 to 65535"},
      {{"--max-restarts", "99999999", "p"}, "--max-restarts '99999999' is not a whole number from 0 to 10000"},
      {{"--rdzv-timeout", "0", "p"}, "--rdzv-timeout '0' is not a whole number from 1 to 604800"},
      {{"--rdzv-timeout", "9999999999999", "p"}, "--rdzv-timeout '9999999999999'"},
      {{"--stop-timeout", "-1", "p"}, "--stop-timeout '-1' is not a whole number from 0 to 3600"},
      {{"--only-ranks", "0,,1", "p"}, "--only-ranks '' is not a whole number"},
      {{"--rdzv-endpoint", "node1:0", "p"}, "--rdzv-endpoint 'node1:0': the port must be from 1 to 65535"},
      {{"--rdzv-endpoint", "node1:65536", "p"}, "--rdzv-endpoint 'node1:65536': the port must be from 1 to 65535"},
      {{"--rdzv-endpoint", "node1", "p"}, "--rdzv-endpoint 'node1' is not HOST:PORT"},
  };
  for (const auto& c : cases) {
    const std::string e = refusal(c.args);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.args[0] << " " << c.args[1] << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_EQ(parse({"--nproc-per-node", "4096", "--rdzv-timeout", "604800", "p"}).nproc_per_node, 4096);
  EXPECT_EQ(parse({"--rdzv-endpoint", "node1:65535", "p"}).rdzv_port, 65535);
}
