// Hardware profiles (see hardware.hpp).
#include "train/plan/hardware.hpp"

#include <cstdio>
#include <filesystem>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace dtrain {

double Hardware::peak_tflops(Precision p) const {
  const double peak = p == Precision::bf16 ? peak_tflops_bf16 : peak_tflops_f32;
  return peak > 0 ? peak : matmul_tflops(p);
}

std::string Hardware::describe() const {
  char b[320];
  std::snprintf(b, sizeof b,
                "%s (%s): %d per node, %.0f GiB each, matmul %.1f / %.1f TFLOP/s (f32 / bf16), memory %.0f GB/s, "
                "links %.0f GB/s in a node, %.0f GB/s between nodes",
                name.c_str(), source.c_str(), ranks_per_node, memory_gib, matmul_tflops_f32, matmul_tflops_bf16,
                memory_gbs, intra.bus_gbs, inter.bus_gbs);
  return b;
}

namespace {

std::string find_profile(const std::string& name) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(name)) return name;
  std::vector<std::string> places = {"configs/hardware/" + name + ".toml"};
  std::error_code ec;  // the source tree's, from build/bin/dtrain or an installed bin/dtrain
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (const char* up : {"../..", "..", "../share/dtrain"})
      places.push_back((exe.parent_path() / up / "configs/hardware" / (name + ".toml")).string());
  for (const std::string& p : places)
    if (fs::is_regular_file(p)) return p;
  throw Error("--hardware " + name +
              ": no such file, nor a profile of configs/hardware (h100, a100, cpu): give a profile's file, or measure "
              "this machine's with `dtrain plan --calibrate --save FILE`");
}

double number(const toml::table& t, const std::string& file, const char* section, const char* key, double lo) {
  const toml::node* n = t.at_path(std::string(section) + "." + key).node();
  const double v = n ? n->value_or(-1e300) : -1e300;
  require(v >= lo, file + ": " + section + "." + key + " is " + (n ? "not a number ≥ " + std::to_string(lo) : "missing") +
                       ": give it (see configs/hardware/h100.toml)");
  return v;
}

}  // namespace

Hardware load_hardware(const std::string& name) {
  const std::string file = find_profile(name);
  toml::table t;
  try {
    t = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    throw Error(file + ": not TOML (" + std::string(e.description()) + "): fix the line it names");
  }
  Hardware h;
  h.source = file;
  h.name = t["name"].value_or(std::filesystem::path(file).stem().string());
  h.device = t["device"].value_or(std::string("cpu"));
  require(h.device == "cpu" || h.device == "cuda", file + ": device = \"" + h.device + "\": use \"cpu\" or \"cuda\"");
  h.matmul_tflops_f32 = number(t, file, "compute", "matmul_tflops_f32", 1e-6);
  h.matmul_tflops_bf16 = number(t, file, "compute", "matmul_tflops_bf16", 1e-6);
  h.peak_tflops_f32 = t["compute"]["peak_tflops_f32"].value_or(0.0);
  h.peak_tflops_bf16 = t["compute"]["peak_tflops_bf16"].value_or(0.0);
  h.memory_gbs = number(t, file, "memory", "bandwidth_gbs", 1e-6);
  h.memory_gib = number(t, file, "memory", "per_rank_gib", 1e-6);
  h.process_gib = number(t, file, "memory", "process_gib", 0.0);
  h.ranks_per_node = int(number(t, file, "node", "ranks_per_node", 1));
  h.intra = {number(t, file, "node", "bus_gbs", 1e-6), number(t, file, "node", "latency_us", 0.0)};
  h.inter = {number(t, file, "network", "bus_gbs", 1e-6), number(t, file, "network", "latency_us", 0.0)};
  h.algorithm = t["network"]["algorithm"].value_or(std::string("ring"));
  require(h.algorithm == "ring" || h.algorithm == "tree",
          file + ": network.algorithm = \"" + h.algorithm + "\": use \"ring\" or \"tree\"");
  return h;
}

std::string hardware_toml(const Hardware& h) {
  char b[1400];
  std::snprintf(b, sizeof b,
                "# %s, measured by `dtrain plan --calibrate`\n"
                "name = \"%s\"\ndevice = \"cpu\"\n\n"
                "[compute]\nmatmul_tflops_f32 = %.4f\nmatmul_tflops_bf16 = %.4f\n\n"
                "[memory]\nbandwidth_gbs = %.2f\nper_rank_gib = %.2f\nprocess_gib = %.3f\n\n"
                "[node]\nranks_per_node = %d\nbus_gbs = %.3f\nlatency_us = %.1f\n\n"
                "[network]\nbus_gbs = %.3f\nlatency_us = %.1f\nalgorithm = \"%s\"\n",
                h.name.c_str(), h.name.c_str(), h.matmul_tflops_f32, h.matmul_tflops_bf16, h.memory_gbs, h.memory_gib,
                h.process_gib, h.ranks_per_node, h.intra.bus_gbs, h.intra.latency_us, h.inter.bus_gbs,
                h.inter.latency_us, h.algorithm.c_str());
  return b;
}

}  // namespace dtrain
