// A machine as the planner's time model sees it (configs/hardware/*.toml, or `dtrain plan --calibrate`'s
// measurement of this one): matrix-product and memory throughput, the links between ranks in a node
// and between nodes, each rank's memory.
#pragma once
#include <map>
#include <string>
#include <vector>

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
  double attention_tflops_f32 = 0.0;   // the attention kernels' scores and values; 0: the matmul rate
  double attention_tflops_bf16 = 0.0;
  double launch_us = 0.0;          // what every kernel call costs besides its work
  // Whether its products run in bf16 when asked (ComputeDevice::bf16_products): on a CPU without
  // them (no avx512) a bf16 run computes and keeps its activations in f32, as the plan then does.
  bool bf16_products = true;
  // Measured rates of single kernels by their ComputeDevice name ("layernorm_forward",
  // "attention_backward", …; ".bf16" appended for a bf16 product): TFLOP/s for those that count FLOPs
  // (KernelWork::flops > 0), GB/s of KernelWork::bytes for the others. A kernel not listed runs at
  // its family's rate (matmul, attention, memory bandwidth).
  std::map<std::string, double> kernels;
  // Measured: matrix products' TFLOP/s on a grid of shapes (every M of grid_rows by every N and K of
  // grid_cols), by "PRECISION.LAYOUT" ("f32.nt": a Linear's forward, ".nn" its input gradient, ".tn"
  // its weight gradient), M fastest-varying last: index (i·cols + j)·cols + k for M i, N j, K k.
  // Empty: matmul_tflops for every shape.
  std::vector<int64_t> grid_rows, grid_cols;
  std::map<std::string, std::vector<double>> matmul_grid;
  // Measured: an all-reduce's seconds by its bytes between two of the node's ranks (ascending bytes),
  // beside a computation on the same cores, and alone (the rank waiting for it between computations,
  // as in a job); empty: the node link's latency and bandwidth. Without an alone curve, the beside one.
  // steal: the seconds of computation it takes beside a computation on a CPU node, whose
  // communication threads copy and reduce on the same cores (empty: none, as where the network does
  // the work; GPUs: NCCL's copies and reductions are left out).
  std::vector<double> allreduce_bytes, allreduce_seconds, allreduce_alone_seconds, allreduce_steal_seconds;
  // How much a computation's time varies from rank to rank with every rank of the node computing, as
  // a coefficient of variation: ranks meeting at a collective wait for the slowest of them (measured
  // on a CPU node, whose cores the system's own work interrupts, as the slowest rank's mean lag over
  // the same products, over E[max of n normals] × their span; 0 where nothing was measured).
  double jitter = 0.0;
  // The span jitter was measured over (seconds of computation), and how the spread grows with the
  // span: a rank's lead after L seconds is jitter · span · (L / span)^jitter_growth (1: ranks whose
  // speeds differ for good, as cores of their own do; below 1: ranks the system time-slices on shared
  // cores, which even out). span 0: the spread grows with the span (growth 1).
  double jitter_span_s = 0.0, jitter_growth = 1.0;
  double memory_gbs = 0.0;         // per rank: what element-wise kernels stream
  double memory_gib = 0.0;         // per rank: what a rank may hold
  double process_gib = 0.0;        // what a process takes before its model (libraries, a CUDA context)
  int ranks_per_node = 1;
  // How many of the node's ranks run at full speed at once (its cores over a rank's threads); 0: all
  // of them. Fewer than ranks_per_node: the ranks share the cores, and the measured rates are those
  // of every rank computing, so a rank computes faster while others wait (a pipeline's bubble).
  int rank_slots = 0;
  Link intra, inter;
  // Collectives' latency across n ranks: "ring" (2(n−1) steps, Gloo) or "tree" (2·log2 n, NCCL's
  // choice for small messages at scale)
  std::string algorithm = "ring";

  double matmul_tflops(Precision p) const { return p == Precision::bf16 ? matmul_tflops_bf16 : matmul_tflops_f32; }
  double attention_tflops(Precision p) const {
    const double a = p == Precision::bf16 ? attention_tflops_bf16 : attention_tflops_f32;
    return a > 0 ? a : matmul_tflops(p);
  }
  double peak_tflops(Precision p) const;
  // TFLOP/s of one product of args' shape and layout (the grid where measured).
  double matmul_rate(const MatmulArgs& args) const;
  // Seconds of an all-reduce over two of the node's ranks moving `bus_bytes` across the link (the
  // measured curve where there is one: `alone` or beside a computation).
  double node_allreduce_seconds(double bus_bytes, bool alone) const;
  // Seconds of computation that all-reduce takes from a computation beside it (0 where unmeasured).
  double node_allreduce_steal(double bus_bytes) const;
  // How much faster than the profile's rates a rank computes while `computing` of the node's ranks
  // compute: on a node whose ranks share its cores (rank_slots below ranks_per_node) the rates are
  // those of every rank computing, and fewer computing have more of the cores; 1 elsewhere.
  double shared_speed(double computing) const;
  // "H100 SXM (configs/hardware/h100.toml): 8 per node, 80 GiB, …"
  std::string describe() const;
};

// The profile named `name`: a file, or a name of configs/hardware (h100, a100, cpu) looked for
// beside the program's source tree and in the current folder. Error naming the choices otherwise.
Hardware load_hardware(const std::string& name);
// Written back as TOML (what --calibrate saves).
std::string hardware_toml(const Hardware& h);

}  // namespace dtrain
