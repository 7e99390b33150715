// dtrun's command line (torchrun's options, range checks, one-line refusals naming the fix) and the
// GPU count behind --nproc-per-node gpu, read without CUDA.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "launch/host_counts.hpp"
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

namespace {

// A machine with `cpus` CPUs and `gpus` GPUs, and SLURM_NODEID = `slurm_node` (nullptr: unset).
LaunchHost machine(int cpus, int gpus, const char* slurm_node = nullptr) {
  return {[=] { return cpus; },
          [=](std::string* why) {
            if (gpus == 0 && why) *why = "no NVIDIA GPU is visible here";
            return gpus;
          },
          [=](const char* name) -> const char* { return std::string(name) == "SLURM_NODEID" ? slurm_node : nullptr; }};
}

LaunchOptions parse_on(const LaunchHost& host, std::vector<std::string> args) {
  args.insert(args.begin(), "dtrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parse_launch_options(int(argv.size()), argv.data(), host);
}

void expect_refused(const std::vector<std::string>& args, const std::string& needle, const LaunchHost& host = machine(4, 0)) {
  std::string joined;
  for (const auto& a : args) joined += a + " ";
  const std::string e = error_of([&] { parse_on(host, args); });
  EXPECT_NE(e.find(needle), std::string::npos) << joined << "→ " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
}

}  // namespace

TEST(LaunchOptions, BothSpellingsAndDashesOrUnderscores) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--nproc-per-node", "3", "p"}, {"--nproc_per_node", "3", "p"}, {"--nproc-per-node=3", "p"},
        {"--nproc_per_node=3", "p"}}) {
    EXPECT_EQ(parse_on(machine(4, 0), args).nproc_per_node, 3) << args[0];
  }
  const LaunchOptions o = parse_on(machine(4, 0), {"--nnodes=2", "--node_rank", "1", "--rdzv_endpoint=n1:29400", "--max_restarts=2",
                                                  "--rdzv_id", "job", "prog", "--nproc-per-node", "9"});
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.rdzv_host, "n1");
  EXPECT_EQ(o.rdzv_port, 29400);
  EXPECT_EQ(o.max_restarts, 2);
  EXPECT_EQ(o.rdzv_id, "job");
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "--nproc-per-node", "9"}));  // PROGRAM's own arguments
  EXPECT_EQ(parse_on(machine(4, 0), {"--", "-odd-name", "x"}).command, (std::vector<std::string>{"-odd-name", "x"}));
  EXPECT_TRUE(parse_on(machine(4, 0), {"--help"}).command.empty());
  EXPECT_TRUE(parse_on(machine(4, 0), {"-h"}).command.empty());
  expect_refused({"--standalone=yes", "p"}, "--standalone takes no value");
  expect_refused({"--nproc-per-node"}, "--nproc-per-node needs a value");
}

TEST(LaunchOptions, WorkersPerNodeCpuGpuAuto) {
  EXPECT_EQ(parse_on(machine(6, 0), {"--nproc-per-node", "cpu", "p"}).nproc_per_node, 6);
  EXPECT_EQ(parse_on(machine(6, 0), {"--nproc-per-node", "auto", "p"}).nproc_per_node, 6);  // no GPU: CPUs
  EXPECT_EQ(parse_on(machine(6, 2), {"--nproc-per-node", "auto", "p"}).nproc_per_node, 2);  // GPUs when there are
  EXPECT_EQ(parse_on(machine(6, 2), {"--nproc-per-node", "gpu", "p"}).nproc_per_node, 2);
  EXPECT_EQ(parse_on(machine(6, 2), {"--nproc-per-node", "cpu", "p"}).nproc_per_node, 6);
  EXPECT_EQ(parse_on(machine(100000, 0), {"--nproc-per-node", "cpu", "p"}).nproc_per_node, 4096);
  expect_refused({"--nproc-per-node", "gpu", "p"}, "--nproc-per-node gpu: no NVIDIA GPU is visible here: give the number "
                                                   "of workers (--nproc-per-node N), or `cpu`");
  expect_refused({"--nproc-per-node", "gpus", "p"}, "--nproc-per-node 'gpus' is not a whole number");
}

TEST(LaunchOptions, NodesAndTheirRanks) {
  LaunchOptions fixed = parse_on(machine(4, 0), {"--nnodes", "2:2", "--node-rank", "1", "p"});
  EXPECT_EQ(fixed.nnodes, 2);
  EXPECT_FALSE(fixed.elastic());
  // An elastic range: no node rank needed (SLURM's, or one given, only orders the nodes).
  LaunchOptions elastic = parse_on(machine(4, 0), {"--nnodes", "1:4", "p"});
  EXPECT_TRUE(elastic.elastic());
  EXPECT_EQ(elastic.min_nodes, 1);
  EXPECT_EQ(elastic.nnodes, 4);
  EXPECT_EQ(elastic.node_rank, -1);
  EXPECT_EQ(parse_on(machine(4, 0, "3"), {"--nnodes", "2:4", "p"}).node_rank, 3);
  EXPECT_EQ(parse_on(machine(4, 0), {"--nnodes", "2:4", "--node-rank", "7", "p"}).node_rank, 7);
  expect_refused({"--nnodes", "4:2", "p"}, "--nnodes 4:2: MIN is above MAX: write the fewest nodes first, e.g. --nnodes 2:4");
  expect_refused({"--nnodes", "2:", "p"}, "--nnodes MAX '' is not a whole number");
  expect_refused({"--nnodes", "2", "p"}, "needs --node-rank on each node");
  EXPECT_EQ(parse_on(machine(4, 0, "1"), {"--nnodes", "2", "p"}).node_rank, 1);  // from SLURM
  expect_refused({"--nnodes", "2", "p"}, "SLURM_NODEID 'x' is not a whole number", machine(4, 0, "x"));
  expect_refused({"--nnodes", "2", "--node-rank", "2", "p"}, "--node-rank 2 is not below --nnodes 2");
}

TEST(LaunchOptions, RendezvousBackendsConfAndMasterAddress) {
  EXPECT_EQ(parse_on(machine(4, 0), {"--rdzv-backend", "static", "p"}).rdzv_backend, "static");
  EXPECT_EQ(parse_on(machine(4, 0), {"--rdzv-backend=c10d", "p"}).rdzv_backend, "c10d");
  expect_refused({"--rdzv-backend", "etcd", "p"}, "dtrun has no etcd rendezvous");
  expect_refused({"--rdzv-backend", "etcd-v2", "p"}, "give --rdzv-endpoint HOST:PORT");
  expect_refused({"--rdzv-backend", "zookeeper", "p"}, "'zookeeper' is not c10d or static");

  LaunchOptions o = parse_on(machine(4, 0), {"--rdzv-conf", "join_timeout=600,read_timeout=30,is_host=yes", "p"});
  EXPECT_EQ(o.rdzv_timeout_s, 600);
  EXPECT_EQ(o.read_timeout_s, 30);
  EXPECT_EQ(o.is_host, std::optional<bool>(true));
  EXPECT_TRUE(o.notes.empty());
  EXPECT_EQ(parse_on(machine(4, 0), {"--rdzv_conf=timeout=45,is_host=False", "p"}).rdzv_timeout_s, 45);
  EXPECT_EQ(parse_on(machine(4, 0), {"--rdzv-conf", "is_host=0", "p"}).is_host, std::optional<bool>(false));
  EXPECT_FALSE(parse_on(machine(4, 0), {"p"}).is_host.has_value());
  o = parse_on(machine(4, 0), {"--rdzv-conf", "last_call_timeout=30,close_timeout=10", "p"});
  ASSERT_EQ(o.notes.size(), 2u);
  EXPECT_NE(o.notes[0].find("close_timeout has no meaning for dtrun's rendezvous; ignored"), std::string::npos);
  EXPECT_NE(o.notes[1].find("last_call_timeout has no meaning for a fixed-size job (--nnodes 1); it applies to elastic "
                            "ones (--nnodes MIN:MAX); ignored"), std::string::npos);
  // Elastic jobs use them.
  o = parse_on(machine(4, 0), {"--nnodes", "1:2", "--rdzv-conf", "last_call_timeout=2,keep_alive_interval=1,"
                                                                 "keep_alive_max_attempt=4", "p"});
  EXPECT_TRUE(o.notes.empty());
  EXPECT_EQ(o.last_call_s, 2);
  EXPECT_EQ(o.keep_alive_s, 1);
  EXPECT_EQ(o.keep_alive_attempts, 4);
  expect_refused({"--rdzv-conf", "keep_alive_interval=0", "p"}, "keep_alive_interval '0' is not a whole number from 1");
  expect_refused({"--rdzv-conf", "join_timeout=600,colour=red", "p"}, "--rdzv-conf: unknown key 'colour': dtrun takes "
                                                                      "join_timeout, timeout, read_timeout, is_host, "
                                                                      "last_call_timeout");
  expect_refused({"--rdzv-conf", "join_timeout", "p"}, "'join_timeout' is not KEY=VALUE");
  expect_refused({"--rdzv-conf", "join_timeout=0", "p"}, "--rdzv-conf join_timeout '0' is not a whole number from 1 to 604800");
  expect_refused({"--rdzv-conf", "is_host=maybe", "p"}, "--rdzv-conf is_host 'maybe' is not true or false");
  expect_refused({"--standalone", "--rdzv-conf", "is_host=false", "p"}, "--standalone hosts its store");

  o = parse_on(machine(4, 0), {"--master-addr", "node7", "--master-port", "29401", "p"});
  EXPECT_EQ(o.rdzv_host, "node7");
  EXPECT_EQ(o.rdzv_port, 29401);
  EXPECT_EQ(parse_on(machine(4, 0), {"--master_addr=node7", "p"}).rdzv_port, 29500);
  expect_refused({"--master-port", "0", "p"}, "--master-port '0' is not a whole number from 1 to 65535");
  expect_refused({"--master-addr", "a", "--rdzv-endpoint", "b:1", "p"}, "give the endpoint once");
  expect_refused({"--standalone", "--master-port", "29400", "p"}, "--standalone picks its own endpoint");
}

TEST(LaunchOptions, RunningOptions) {
  EXPECT_EQ(parse_on(machine(4, 0), {"p"}).monitor_interval_ms, 100);
  EXPECT_EQ(parse_on(machine(4, 0), {"--monitor-interval", "0.5", "p"}).monitor_interval_ms, 500);
  EXPECT_EQ(parse_on(machine(4, 0), {"--monitor_interval=5", "p"}).monitor_interval_ms, 5000);
  for (const char* bad : {"0", "-1", "abc", "1e9", "nan", ""})
    expect_refused({"--monitor-interval", bad, "p"}, "--monitor-interval '" + std::string(bad) + "' is not a number of seconds");
  for (const char* method : {"spawn", "fork", "forkserver"})
    EXPECT_EQ(parse_on(machine(4, 0), {"--start-method", method, "p"}).command.size(), 1u);
  expect_refused({"--start-method", "thread", "p"}, "'thread' is not spawn, fork or forkserver");
  EXPECT_EQ(parse_on(machine(4, 0), {"--no-python", "p"}).command, std::vector<std::string>{"p"});
  EXPECT_EQ(parse_on(machine(4, 0), {"--role", "trainer", "p"}).role, "trainer");
  EXPECT_EQ(parse_on(machine(4, 0), {"p"}).save_timeout_s, 600);
  EXPECT_EQ(parse_on(machine(4, 0), {"--save_timeout=30", "p"}).save_timeout_s, 30);
  expect_refused({"--save-timeout", "0", "p"}, "--save-timeout '0' is not a whole number from 1 to 604800");
  expect_refused({"--role=", "p"}, "--role needs a name");
}

// --log-level, else DTRAIN_LOG_LEVEL, else info; a bad value is one line naming the three.
TEST(LaunchOptions, LogLevelFromTheOptionOrTheEnvironment) {
  const auto with_env = [](const char* level) {
    return LaunchHost{[] { return 4; }, [](std::string*) { return 0; },
                      [=](const char* name) -> const char* { return std::string(name) == "DTRAIN_LOG_LEVEL" ? level : nullptr; }};
  };
  EXPECT_EQ(parse_on(machine(4, 0), {"p"}).log_level, LogLevel::info);
  EXPECT_EQ(parse_on(machine(4, 0), {"--log-level", "quiet", "p"}).log_level, LogLevel::quiet);
  EXPECT_EQ(parse_on(with_env("debug"), {"p"}).log_level, LogLevel::debug);
  EXPECT_EQ(parse_on(with_env("debug"), {"--log_level=quiet", "p"}).log_level, LogLevel::quiet);
  EXPECT_EQ(parse_on(with_env(""), {"p"}).log_level, LogLevel::info);
  EXPECT_STREQ(log_level_name(LogLevel::debug), "debug");
  const std::string bad_env = error_of([&] { parse_on(with_env("loud"), {"p"}); });
  EXPECT_NE(bad_env.find("DTRAIN_LOG_LEVEL 'loud' is not quiet, info or debug"), std::string::npos) << bad_env;
  expect_refused({"--log-level", "verbose", "p"}, "--log-level 'verbose' is not quiet, info or debug");
}

TEST(LaunchOptions, OutputFiltersAndLogFiles) {
  LaunchOptions o = parse_on(machine(4, 0), {"--nproc-per-node", "2", "--local-ranks-filter", "1", "--only-ranks", "0,1", "p"});
  EXPECT_EQ(o.output.only_local_ranks, std::vector<int>{1});
  EXPECT_EQ(o.output.only_ranks, (std::vector<int>{0, 1}));
  expect_refused({"--nproc-per-node", "2", "--local-ranks-filter", "2", "p"}, "this node's local ranks are 0 to 1");

  o = parse_on(machine(4, 0), {"--nproc-per-node", "2", "--log-dir", "/tmp/l", "-r", "3", "--tee=0:1,1:2", "p"});
  EXPECT_EQ(o.output.log_dir, "/tmp/l");
  EXPECT_EQ(o.output.redirects.for_local_rank(1), 3);
  EXPECT_EQ(o.output.tee.for_local_rank(0), 1);
  EXPECT_EQ(o.output.tee.for_local_rank(1), 2);
  EXPECT_TRUE(o.notes.empty());
  EXPECT_EQ(parse_on(machine(4, 0), {"--log_dir=/tmp/l", "-t", "2", "p"}).output.tee.for_local_rank(5), 2);
  expect_refused({"--redirects", "3", "p"}, "--redirects writes log files: add --log-dir DIR");
  expect_refused({"--tee", "1", "p"}, "--tee writes log files: add --log-dir DIR");
  expect_refused({"--log-dir", "d", "--redirects", "4", "p"}, "--redirects '4' is not a whole number from 0 to 3");
  expect_refused({"--log-dir", "d", "--redirects", "0:1,2", "p"}, "mixes one value with LOCAL_RANK:S pairs");
  expect_refused({"--nproc-per-node", "2", "--log-dir", "d", "--tee", "5:1", "p"}, "--tee names local rank 5");
  o = parse_on(machine(4, 0), {"--log-dir", "/tmp/l", "p"});
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("nothing is written there without --redirects or --tee"), std::string::npos);
}

TEST(LaunchOptions, PythonOnlyAndUnknownOptionsAreRefused) {
  expect_refused({"-m", "trainer", "p"}, "-m/--module runs a Python module or script; dtrun runs a program: give its path");
  expect_refused({"--module", "p"}, "give its path, e.g. dtrun --nproc-per-node 4 build/bin/dtrain");
  expect_refused({"--run-path", "p"}, "--run-path runs a Python module or script");
  expect_refused({"--run_path", "p"}, "--run-path runs");
  expect_refused({"--local-addr", "10.0.0.1", "p"}, "set DTRAIN_SOCKET_IFNAME");
  expect_refused({"--frobnicate", "p"}, "unknown option --frobnicate: see `dtrun --help`");
  expect_refused({"-x", "p"}, "unknown option -x");
}

// The usage lists what the parser takes: every option it names is known to the parser.
TEST(LaunchOptions, TheUsageNamesOnlyOptionsThatExist) {
  const std::string usage = kLaunchUsage;
  EXPECT_EQ(usage.find("torchrun's options)"), std::string::npos);
  int named = 0;
  for (size_t k = usage.find("--"); k != std::string::npos; k = usage.find("--", k + 2)) {
    size_t e = k + 2;
    while (e < usage.size() && (std::islower(static_cast<unsigned char>(usage[e])) || usage[e] == '-' || usage[e] == '_')) ++e;
    const std::string opt = usage.substr(k, e - k);
    if (opt.size() <= 2) continue;
    ++named;
    const std::string err = error_of([&] { parse_on(machine(4, 1), {opt, "1", "p"}); });
    EXPECT_EQ(err.find("unknown option"), std::string::npos) << opt << ": " << err;
  }
  EXPECT_GE(named, 25);
  for (const char* opt : {"--nproc-per-node", "--rdzv-backend", "--rdzv-conf", "--master-addr", "--master-port",
                          "--monitor-interval", "--start-method", "--role", "--local-ranks-filter", "--log-dir",
                          "--redirects", "--tee", "--no-python", "--run-path", "--module", "--local-addr"})
    EXPECT_NE(usage.find(opt), std::string::npos) << opt;
}

// GPUs as the driver shows them (a fake /proc/driver/nvidia/gpus and /dev), narrowed by
// CUDA_VISIBLE_DEVICES as CUDA reads it.
TEST(LaunchOptions, GpusAreCountedWithoutCuda) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / ("gpus_" + std::to_string(getpid()));
  fs::remove_all(root);
  const fs::path proc = root / "proc", dev = root / "dev", none = root / "none";
  fs::create_directories(dev);
  const char* uuids[] = {"GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-cccc3333-0000", "GPU-dddd4444-0000"};
  for (int i = 0; i < 4; ++i) {
    const fs::path d = proc / ("0000:0" + std::to_string(i) + ":00.0");
    fs::create_directories(d);
    std::ofstream(d / "information") << "Model: \t\t NVIDIA H100\nGPU UUID: \t " << uuids[i] << "\nBus Location: x\n";
  }
  const std::string p = proc.string(), d = dev.string();
  EXPECT_EQ(count_nvidia_gpus(p, d, nullptr), 4);
  EXPECT_EQ(count_nvidia_gpus(p, d, ""), 0);
  EXPECT_EQ(count_nvidia_gpus(p, d, "0,2"), 2);
  EXPECT_EQ(count_nvidia_gpus(p, d, " 3 , 1 "), 2);
  EXPECT_EQ(count_nvidia_gpus(p, d, "1,7,2"), 1);  // the list ends at the first that names no GPU
  EXPECT_EQ(count_nvidia_gpus(p, d, "0,0,1"), 2);
  EXPECT_EQ(count_nvidia_gpus(p, d, "-1"), 0);
  EXPECT_EQ(count_nvidia_gpus(p, d, "NoDevFiles"), 0);
  EXPECT_EQ(count_nvidia_gpus(p, d, "GPU-bbbb2222"), 1);  // a UUID or its prefix
  EXPECT_EQ(count_nvidia_gpus(p, d, "GPU-bbbb2222,GPU-ffff"), 1);
  EXPECT_EQ(count_nvidia_gpus(p, d, "MIG-1234"), 1);
  // No /proc listing: the device files (not nvidiactl, nvidia-uvm…)
  for (const char* f : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-modeset"})
    std::ofstream(dev / f) << "";
  EXPECT_EQ(count_nvidia_gpus(none.string(), d, nullptr), 3);
  EXPECT_EQ(count_nvidia_gpus(none.string(), d, "2"), 1);
  EXPECT_EQ(count_nvidia_gpus(none.string(), d, "3"), 0);
  EXPECT_EQ(count_nvidia_gpus(none.string(), none.string(), nullptr), 0);
  EXPECT_EQ(count_nvidia_gpus(none.string(), none.string(), "0"), 0);
  fs::remove_all(root);
  EXPECT_GE(usable_cpus(), 1);
}
