// Hardware profiles (see hardware.hpp).
#include "train/plan/hardware.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <toml++/toml.h>

#include "core/error.hpp"

namespace dtrain {

double Hardware::peak_tflops(Precision p) const {
  const double peak = p == Precision::bf16 ? peak_tflops_bf16 : peak_tflops_f32;
  return peak > 0 ? peak : matmul_tflops(p);
}

namespace {

// Where x falls on an ascending axis (as log2), clamped: the cell [i, i + 1] and the weight of i + 1.
std::pair<size_t, double> locate(const std::vector<double>& axis, double x) {
  if (axis.size() < 2 || x <= axis.front()) return {0, 0.0};
  if (x >= axis.back()) return {axis.size() - 2, 1.0};
  size_t i = 0;
  while (axis[i + 1] < x) ++i;
  return {i, (std::log2(x) - std::log2(axis[i])) / (std::log2(axis[i + 1]) - std::log2(axis[i]))};
}

std::vector<double> as_doubles(const std::vector<int64_t>& v) { return std::vector<double>(v.begin(), v.end()); }

}  // namespace

double Hardware::matmul_rate(const MatmulArgs& a) const {
  const std::string layout = a.trans_a ? "tn" : a.trans_b ? "nt" : "nn";
  const auto it = matmul_grid.find(std::string(a.precision == Precision::bf16 ? "bf16." : "f32.") + layout);
  if (it == matmul_grid.end() || grid_rows.size() < 2 || grid_cols.size() < 2) return matmul_tflops(a.precision);
  const std::vector<double> rows = as_doubles(grid_rows), cols = as_doubles(grid_cols);
  const auto [i, wi] = locate(rows, double(a.M));
  const auto [j, wj] = locate(cols, double(a.N));
  const auto [k, wk] = locate(cols, double(a.K));
  const size_t C = cols.size();
  double rate = 0.0;  // trilinear over the cell's corners
  for (int di = 0; di < 2; ++di)
    for (int dj = 0; dj < 2; ++dj)
      for (int dk = 0; dk < 2; ++dk) {
        const double w = (di ? wi : 1 - wi) * (dj ? wj : 1 - wj) * (dk ? wk : 1 - wk);
        if (w > 0) rate += w * it->second[((i + size_t(di)) * C + j + size_t(dj)) * C + k + size_t(dk)];
      }
  return rate;
}

double Hardware::shared_speed(double computing) const {
  if (rank_slots <= 0 || ranks_per_node <= rank_slots || computing <= 0) return 1.0;
  const double slots = double(rank_slots), everyone = slots / double(ranks_per_node);
  return std::min(1.0, slots / computing) / everyone;
}

namespace {

// The curve `s` (by allreduce_bytes) at `bus_bytes`: interpolated, or past its end at its last rate.
double on_curve(const std::vector<double>& bytes, const std::vector<double>& s, double bus_bytes) {
  const auto [i, w] = locate(bytes, std::max(bus_bytes, 1.0));
  if (bus_bytes > bytes.back()) return s.back() * bus_bytes / bytes.back();
  return s[i] + w * (s[i + 1] - s[i]);
}

}  // namespace

double Hardware::node_allreduce_seconds(double bus_bytes, bool alone) const {
  if (allreduce_bytes.size() < 2) return 2.0 * intra.latency_us * 1e-6 + bus_bytes / (intra.bus_gbs * 1e9);
  return on_curve(allreduce_bytes,
                  alone && !allreduce_alone_seconds.empty() ? allreduce_alone_seconds : allreduce_seconds, bus_bytes);
}

double Hardware::node_allreduce_steal(double bus_bytes) const {
  if (allreduce_bytes.size() < 2 || allreduce_steal_seconds.empty()) return 0.0;
  return on_curve(allreduce_bytes, allreduce_steal_seconds, bus_bytes);
}

std::string Hardware::describe() const {
  char b[640];
  std::snprintf(b, sizeof b,
                "%s (%s): %d per node, %.0f GiB each, matmul %.1f / %.1f TFLOP/s (f32 / bf16%s), memory %.0f GB/s, "
                "links %.0f GB/s in a node, %.0f GB/s between nodes",
                name.c_str(), source.c_str(), ranks_per_node, memory_gib, matmul_tflops_f32, matmul_tflops_bf16,
                bf16_products ? "" : ": no bf16 products, bf16 runs in f32", memory_gbs, intra.bus_gbs, inter.bus_gbs);
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
  h.attention_tflops_f32 = t["compute"]["attention_tflops_f32"].value_or(0.0);
  h.attention_tflops_bf16 = t["compute"]["attention_tflops_bf16"].value_or(0.0);
  h.launch_us = t["compute"]["launch_us"].value_or(0.0);
  if (const auto b = t["compute"]["bf16_products"]) {
    require(b.is_boolean() && (h.device == "cpu" || b.value_or(true)),
            file + ": compute.bf16_products must be true or false, and false only for a CPU (a GPU's products run "
                   "in bf16): fix it, or measure this machine's with dtrain plan --calibrate");
    h.bf16_products = b.value_or(true);
  }
  h.peak_tflops_bf16 = t["compute"]["peak_tflops_bf16"].value_or(0.0);
  h.memory_gbs = number(t, file, "memory", "bandwidth_gbs", 1e-6);
  h.memory_gib = number(t, file, "memory", "per_rank_gib", 1e-6);
  h.process_gib = number(t, file, "memory", "process_gib", 0.0);
  h.ranks_per_node = int(number(t, file, "node", "ranks_per_node", 1));
  h.rank_slots = int(t["node"]["rank_slots"].value_or(int64_t(0)));
  require(h.rank_slots >= 0, file + ": node.rank_slots must be at least 0 (0: every rank of the node at full speed)");
  h.intra = {number(t, file, "node", "bus_gbs", 1e-6), number(t, file, "node", "latency_us", 0.0)};
  require(!t["node"]["comm_steal"], file + ": node.comm_steal (a share of the collectives' time) is replaced by "
                                          "node_allreduce.steal_seconds (by bytes): measure the profile again with "
                                          "dtrain plan --calibrate");
  h.jitter = t["node"]["jitter"].value_or(0.0);
  require(h.jitter >= 0 && h.jitter <= 1, file + ": node.jitter must lie in 0..1 (a coefficient of variation)");
  h.jitter_span_s = t["node"]["jitter_span_s"].value_or(0.0);
  h.jitter_growth = t["node"]["jitter_growth"].value_or(1.0);
  require(h.jitter_span_s >= 0 && h.jitter_growth >= 0 && h.jitter_growth <= 1,
          file + ": node.jitter_span_s must be at least 0 and node.jitter_growth lie in 0..1");
  h.inter = {number(t, file, "network", "bus_gbs", 1e-6), number(t, file, "network", "latency_us", 0.0)};
  h.algorithm = t["network"]["algorithm"].value_or(std::string("ring"));
  auto array = [&](const toml::node_view<toml::node> n, const std::string& what, bool zero_too = false) {
    std::vector<double> out;
    if (const toml::array* a = n.as_array())
      for (const toml::node& e : *a) {
        const double v = e.value_or(-1.0);
        require(v > 0 || (zero_too && v == 0),
                file + ": " + what + " holds a value that is not a " + (zero_too ? "non-negative" : "positive") + " number");
        out.push_back(v);
      }
    return out;
  };
  for (double v : array(t["matmul_grid"]["rows"], "matmul_grid.rows")) h.grid_rows.push_back(int64_t(v));
  for (double v : array(t["matmul_grid"]["cols"], "matmul_grid.cols")) h.grid_cols.push_back(int64_t(v));
  if (const toml::table* g = t["matmul_grid"].as_table())
    for (const auto& [key, value] : *g) {
      const std::string name(key.str());
      if (name == "rows" || name == "cols") continue;
      h.matmul_grid[name] = array(t["matmul_grid"][name], "matmul_grid." + name);
      require(h.matmul_grid[name].size() == h.grid_rows.size() * h.grid_cols.size() * h.grid_cols.size(),
              file + ": matmul_grid." + name + " needs one rate per rows × cols × cols shape");
    }
  h.allreduce_bytes = array(t["node_allreduce"]["bytes"], "node_allreduce.bytes");
  h.allreduce_seconds = array(t["node_allreduce"]["seconds"], "node_allreduce.seconds");
  if (t["node_allreduce"]["alone_seconds"])
    h.allreduce_alone_seconds = array(t["node_allreduce"]["alone_seconds"], "node_allreduce.alone_seconds");
  if (t["node_allreduce"]["steal_seconds"])
    h.allreduce_steal_seconds = array(t["node_allreduce"]["steal_seconds"], "node_allreduce.steal_seconds", true);
  auto fits = [&](const std::vector<double>& v) { return v.empty() || v.size() == h.allreduce_bytes.size(); };
  require(h.allreduce_bytes.size() == h.allreduce_seconds.size() && fits(h.allreduce_alone_seconds) &&
              fits(h.allreduce_steal_seconds),
          file + ": node_allreduce needs as many seconds (and alone_seconds, steal_seconds) as bytes");
  if (const toml::table* k = t["kernels"].as_table())
    for (const auto& [name, value] : *k) {
      const double rate = value.value_or(0.0);
      require(rate > 0, file + ": kernels." + std::string(name.str()) + " is not a positive rate: give TFLOP/s or GB/s");
      h.kernels[std::string(name.str())] = rate;
    }
  require(h.algorithm == "ring" || h.algorithm == "tree",
          file + ": network.algorithm = \"" + h.algorithm + "\": use \"ring\" or \"tree\"");
  return h;
}

std::string hardware_toml(const Hardware& h) {
  char b[1600];
  std::snprintf(b, sizeof b,
                "# %s, measured by `dtrain plan --calibrate`\n"
                "name = \"%s\"\ndevice = \"cpu\"\n\n"
                "[compute]\nmatmul_tflops_f32 = %.4f\nmatmul_tflops_bf16 = %.4f\nattention_tflops_f32 = %.4f\n"
                "attention_tflops_bf16 = %.4f\nlaunch_us = %.2f\nbf16_products = %s\n\n"
                "[memory]\nbandwidth_gbs = %.2f\nper_rank_gib = %.2f\nprocess_gib = %.3f\n\n"
                "[node]\nranks_per_node = %d\nrank_slots = %d\nbus_gbs = %.3f\nlatency_us = %.1f\njitter = %.3f\njitter_span_s = %.4f\njitter_growth = %.3f\n\n"
                "[network]\nbus_gbs = %.3f\nlatency_us = %.1f\nalgorithm = \"%s\"\n",
                h.name.c_str(), h.name.c_str(), h.matmul_tflops_f32, h.matmul_tflops_bf16, h.attention_tflops_f32,
                h.attention_tflops_bf16, h.launch_us, h.bf16_products ? "true" : "false", h.memory_gbs, h.memory_gib,
                h.process_gib, h.ranks_per_node, h.rank_slots, h.intra.bus_gbs, h.intra.latency_us, h.jitter, h.jitter_span_s,
                h.jitter_growth, h.inter.bus_gbs,
                h.inter.latency_us, h.algorithm.c_str());
  std::string out = b;
  if (!h.kernels.empty()) {
    out += "\n[kernels]  # TFLOP/s of the kernels that count FLOPs, GB/s of the others\n";
    for (const auto& [name, rate] : h.kernels) {
      std::snprintf(b, sizeof b, "\"%s\" = %.4f\n", name.c_str(), rate);
      out += b;
    }
  }
  auto list = [](const auto& v) {
    std::string s = "[";
    char n[32];
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(n, sizeof n, "%s%.6g", i ? ", " : "", double(v[i]));
      s += n;
    }
    return s + "]";
  };
  if (!h.matmul_grid.empty()) {
    out += "\n[matmul_grid]  # TFLOP/s by shape: every M of rows by every N and K of cols (M slowest)\nrows = " +
           list(h.grid_rows) + "\ncols = " + list(h.grid_cols) + "\n";
    for (const auto& [name, rates] : h.matmul_grid) out += "\"" + name + "\" = " + list(rates) + "\n";
  }
  if (!h.allreduce_bytes.empty())
    out += "\n[node_allreduce]  # seconds of an all-reduce between two local ranks by bytes: beside a computation, "
           "alone, and the computation's seconds it takes beside one\n"
           "bytes = " + list(h.allreduce_bytes) + "\nseconds = " + list(h.allreduce_seconds) + "\n" +
           (h.allreduce_alone_seconds.empty() ? "" : "alone_seconds = " + list(h.allreduce_alone_seconds) + "\n") +
           (h.allreduce_steal_seconds.empty() ? "" : "steal_seconds = " + list(h.allreduce_steal_seconds) + "\n");
  return out;
}

}  // namespace dtrain
