// A machine as the planner's time model sees it (configs/hardware/*.toml, or `dtrain plan --calibrate`'s
// measurement of this one): matrix-product and memory throughput, the links between ranks in a node
// and between nodes, each rank's memory.
#pragma once
#include <string>

#include "kernels/types.hpp"

namespace dtrain {

// A link as collectives see it: bus bandwidth (nccl-tests' busbw: comparable to the link's speed)
// and the latency of one step of an algorithm.
struct Link {
  double bus_gbs = 1.0;     // GB/s (1e9 bytes)
  double latency_us = 10.0;
};

struct Hardware {
  std::string name;
  std::string source;             // the file it was read from, or "measured"
  std::string device = "cpu";     // what train.device a run there names: cpu | cuda (what each runs: docs/planning.md)
  double matmul_tflops_f32 = 0.0;  // achieved on large matrix products, per rank
  double matmul_tflops_bf16 = 0.0;
  double peak_tflops_f32 = 0.0;    // the datasheet's (for MFU); 0: the achieved
  double peak_tflops_bf16 = 0.0;
  double memory_gbs = 0.0;         // per rank: what element-wise kernels stream
  double memory_gib = 0.0;         // per rank: what a rank may hold
  double process_gib = 0.0;        // what a process takes before its model (libraries, a CUDA context)
  int ranks_per_node = 1;
  Link intra, inter;
  // Collectives' latency across n ranks: "ring" (2(n−1) steps, Gloo) or "tree" (2·log2 n, NCCL's
  // choice for small messages at scale)
  std::string algorithm = "ring";

  double matmul_tflops(Precision p) const { return p == Precision::bf16 ? matmul_tflops_bf16 : matmul_tflops_f32; }
  double peak_tflops(Precision p) const;
  // "H100 SXM (configs/hardware/h100.toml): 8 per node, 80 GiB, …"
  std::string describe() const;
};

// The profile named `name`: a file, or a name of configs/hardware (h100, a100, cpu) looked for
// beside the program's source tree and in the current folder. Error naming the choices otherwise.
Hardware load_hardware(const std::string& name);
// Written back as TOML (what --calibrate saves).
std::string hardware_toml(const Hardware& h);

}  // namespace dtrain
