// calibrate_this_machine (see calibrate.hpp).
#include "train/plan/calibrate.hpp"

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "kernels/counting_device.hpp"
#include "kernels/device.hpp"
#include "parallel/cp/sequence_split.hpp"
#include "tensor/memory.hpp"
#include "train/plan/calibrate_link.hpp"
#include "train/report/memory_account.hpp"

namespace dtrain {

namespace {

using Clock = std::chrono::steady_clock;

// The median of `reps` timings of f, each over enough calls to last 10 ms (a short kernel's timing is
// otherwise its noise). The median, not the best: the planner predicts a run's typical step, whose
// kernels are as often interrupted as a calibration's rounds (the best made every prediction here
// 5-10% fast).
template <class F>
double typical_seconds(int reps, F&& f) {
  auto t0 = Clock::now();
  f();  // warm-up (oneDNN makes its kernel here)
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int calls = once >= 0.01 ? 1 : int(std::min(1000.0, std::ceil(0.01 / std::max(once, 1e-7))));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    t0 = Clock::now();
    for (int c = 0; c < calls; ++c) f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / calls);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Over shapes of a model's Linear layers (M rows of a batch; N, K its widths): all their FLOPs over
// all their typical times.
double matmul_tflops(Precision p) {
  const int64_t shapes[][3] = {{4096, 768, 768}, {4096, 2048, 512}, {4096, 512, 2048}, {1024, 1024, 1024}};
  double flops = 0.0, seconds = 0.0;
  for (const auto& [M, N, K] : shapes) {
    std::vector<float> a(size_t(M * K), 0.5f), b(size_t(K * N), 0.25f), c(size_t(M * N), 0.0f);
    const MatmulArgs args{M, N, K, false, false, false, nullptr, p};
    seconds += typical_seconds(3, [&] { cpu_device().matmul(a.data(), b.data(), c.data(), args); });
    flops += 2.0 * double(M) * double(N) * double(K);
  }
  return flops / seconds / 1e12;
}

double memory_gbs() {
  const int64_t n = int64_t(1) << 26;  // 256 MiB per array: past every cache
  std::vector<float> a(size_t(n), 1.0f), b(size_t(n), 2.0f), c(size_t(n), 0.0f);
  const double s = typical_seconds(5, [&] { cpu_device().add(a.data(), b.data(), c.data(), n); });
  return 3.0 * double(n) * sizeof(float) / s / 1e9;  // two reads, one write
}

// One kernel measured: its work as the counting device states it (the planner's own account), over
// its typical time on the CPU device. Rate: TFLOP/s where it counts FLOPs, GB/s otherwise.
struct KernelProbe {
  CountingDevice counting;
  KernelWork last{};
  KernelProbe() {
    counting.on_kernel([this](const KernelWork& w) { last = w; });
  }
  template <class F>
  void measure(Hardware& h, F&& call) {
    call(static_cast<ComputeDevice&>(counting));
    const KernelWork w = last;
    const double s = typical_seconds(5, [&] { call(cpu_device()); });
    std::string name = w.name;
    if (w.flops > 0 && w.precision == Precision::bf16) name += ".bf16";
    h.kernels[name] = w.flops > 0 ? w.flops / s / 1e12 : w.bytes / s / 1e9;
  }
};

// Ring attention's kernels (context parallel) for one rank of two: a block of the other rank's keys,
// with and without dropout.
void measure_attention_blocks(KernelProbe& p, Hardware& h, const AttentionShape& att, const DropoutSpec& drop) {
  const AttentionBlocks a{att, sequence_shard(2 * att.T, 2, 0)};
  const SequenceShard keys = sequence_shard(2 * att.T, 2, 1);
  const size_t rows = size_t(att.B * att.T), heads = size_t(att.B * att.H * att.T);
  std::vector<float> qkv(rows * size_t(att.row_width()), 0.1f), dqkv(qkv.size()), out(rows * size_t(att.H * att.Dh), 0.1f),
      kv(rows * size_t(2 * att.kv() * att.Dh), 0.1f), dkv(kv.size()), stats(2 * heads), lse(heads), delta(heads);
  p.measure(h, [&](ComputeDevice& d) { d.kv_block_pack(qkv.data(), kv.data(), att); });
  p.measure(h, [&](ComputeDevice& d) { d.kv_block_unpack(dkv.data(), dqkv.data(), att); });
  p.measure(h, [&](ComputeDevice& d) { d.attention_blocks_delta(out.data(), out.data(), delta.data(), a); });
  for (const DropoutSpec& dr : {DropoutSpec{}, drop}) {
    p.measure(h, [&](ComputeDevice& d) {
      d.attention_block_forward(qkv.data(), kv.data(), keys, out.data(), stats.data(), a, dr, true);
    });
    p.measure(h, [&](ComputeDevice& d) {
      d.attention_block_backward(out.data(), qkv.data(), kv.data(), keys, lse.data(), delta.data(), dqkv.data(),
                                 dkv.data(), a, dr, true);
    });
  }
  p.measure(h, [&](ComputeDevice& d) { d.attention_blocks_finish(out.data(), stats.data(), lse.data(), a); });
}

// The kernels a model's step calls besides the large products, each at a size of a small model's
// step (4096 rows of 512, 8 × 256 positions of 8 heads of 64).
void measure_kernels(Hardware& h) {
  const int64_t R = 4096, D = 512, n = R * D;
  const size_t N = size_t(n), rows = size_t(R), cols = size_t(D);
  std::vector<float> x(N, 0.5f), y(N, 0.25f), z(N, 0.0f), g(cols, 1.0f), b(cols, 0.0f), mean(rows, 0.0f), rstd(rows, 1.0f),
      dg(cols, 0.0f), db(cols, 0.0f), w(2 * N, 0.1f);
  std::vector<uint16_t> half(N, 0);
  double acc = 0.0;
  KernelProbe p;
  p.measure(h, [&](ComputeDevice& d) { d.add(x.data(), y.data(), z.data(), n); });
  p.measure(h, [&](ComputeDevice& d) { d.scale(z.data(), 0.5f, n); });
  p.measure(h, [&](ComputeDevice& d) { d.to_bf16(x.data(), half.data(), n); });
  p.measure(h, [&](ComputeDevice& d) { d.from_bf16(half.data(), z.data(), n); });
  p.measure(h, [&](ComputeDevice& d) { d.sumsq(x.data(), n, &acc); });
  p.measure(h, [&](ComputeDevice& d) { d.colsum_accumulate(x.data(), g.data(), R, D); });
  p.measure(h, [&](ComputeDevice& d) { d.layernorm_forward(x.data(), g.data(), b.data(), z.data(), mean.data(), rstd.data(), R, D, 1e-5f); });
  p.measure(h, [&](ComputeDevice& d) {
    d.layernorm_backward(y.data(), x.data(), g.data(), mean.data(), rstd.data(), z.data(), dg.data(), db.data(), R, D, false);
  });
  p.measure(h, [&](ComputeDevice& d) { d.rmsnorm_forward(x.data(), g.data(), z.data(), rstd.data(), R, D, 1e-5f); });
  p.measure(h, [&](ComputeDevice& d) {
    d.rmsnorm_backward(y.data(), x.data(), g.data(), rstd.data(), z.data(), dg.data(), R, D, false);
  });
  for (Activation a : {Activation::relu, Activation::gelu}) {
    p.measure(h, [&](ComputeDevice& d) { d.activation_forward(a, x.data(), z.data(), n); });
    p.measure(h, [&](ComputeDevice& d) { d.activation_backward(a, x.data(), y.data(), z.data(), n); });
  }
  p.measure(h, [&](ComputeDevice& d) { d.relu_backward_from_output(x.data(), y.data(), z.data(), n, 1.0f); });
  p.measure(h, [&](ComputeDevice& d) { d.swiglu_forward(w.data(), z.data(), R, D); });
  p.measure(h, [&](ComputeDevice& d) { d.swiglu_backward(w.data(), y.data(), w.data(), R, D); });
  DropoutSpec drop;
  drop.p = 0.1f;
  drop.seed = 1;
  p.measure(h, [&](ComputeDevice& d) { d.dropout_forward(x.data(), z.data(), R, D, drop); });
  p.measure(h, [&](ComputeDevice& d) { d.dropout_backward(y.data(), z.data(), R, D, drop); });
  std::vector<int32_t> tokens(size_t(R), 7);
  p.measure(h, [&](ComputeDevice& d) {
    d.embedding_forward(tokens.data(), x.data(), nullptr, z.data(), 8, R / 8, D, VocabRange{0, 1024});
  });
  p.measure(h, [&](ComputeDevice& d) {
    d.embedding_backward(tokens.data(), y.data(), z.data(), nullptr, 8, R / 8, D, VocabRange{0, 1024});
  });
  RopeShape rope;
  rope.B = 8, rope.T = 256, rope.heads = 8, rope.head_dim = 64;
  std::vector<float> qkv(size_t(rope.B * rope.T * rope.row_width()), 0.1f), dqkv(qkv.size());
  p.measure(h, [&](ComputeDevice& d) { d.rope_forward(dqkv.data(), rope); });
  p.measure(h, [&](ComputeDevice& d) { d.rope_backward(dqkv.data(), rope); });
  AttentionShape att{8, 256, 8, 64};
  std::vector<float> out(static_cast<size_t>(att.B * att.T * att.H * att.Dh)), probs(static_cast<size_t>(att.B * att.H * att.T * att.T));
  p.measure(h, [&](ComputeDevice& d) { d.attention_forward(qkv.data(), out.data(), probs.data(), att, DropoutSpec{}); });
  p.measure(h, [&](ComputeDevice& d) {
    d.attention_backward(out.data(), qkv.data(), probs.data(), dqkv.data(), att, DropoutSpec{});
  });
  p.measure(h, [&](ComputeDevice& d) { d.attention_forward(qkv.data(), out.data(), probs.data(), att, drop); });
  p.measure(h, [&](ComputeDevice& d) { d.attention_backward(out.data(), qkv.data(), probs.data(), dqkv.data(), att, drop); });
  measure_attention_blocks(p, h, att, drop);
  for (Precision pr : {Precision::f32, Precision::bf16}) {
    ClassifierArgs c{};
    c.x = x.data();
    c.W = w.data();
    c.targets = tokens.data();
    c.N = R, c.d = 256, c.V = 4096;
    c.precision = pr;
    std::vector<float> per_row(static_cast<size_t>(R)), dx(static_cast<size_t>(R * 256)), dW(static_cast<size_t>(4096 * 256));
    c.dx = dx.data();
    c.dW = dW.data();
    p.measure(h, [&](ComputeDevice& d) { d.classifier_loss(c, per_row.data(), &acc); });
  }
  std::vector<float> m(static_cast<size_t>(n)), v(static_cast<size_t>(n));
  p.measure(h, [&](ComputeDevice& d) {
    d.adamw_update(z.data(), y.data(), m.data(), v.data(), n, AdamWHyper{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1});
  });
  // what a call costs besides its work: a tiny add
  h.launch_us = typical_seconds(200, [&] { cpu_device().add(x.data(), y.data(), z.data(), 16); }) * 1e6;
}

// Matrix products on a grid of shapes, each precision and operand layout of a Linear's three products.
void measure_matmul_grid(Hardware& h) {
  h.grid_rows = {512, 2048, 8192};
  h.grid_cols = {128, 512, 2048};
  for (Precision p : {Precision::f32, Precision::bf16})
    for (const char* layout : {"nt", "nn", "tn"}) {
      std::vector<double>& rates = h.matmul_grid[std::string(p == Precision::bf16 ? "bf16." : "f32.") + layout];
      for (int64_t M : h.grid_rows)
        for (int64_t N : h.grid_cols)
          for (int64_t K : h.grid_cols) {
            std::vector<float> a(size_t(M * K), 0.5f), b(size_t(K * N), 0.25f), c(size_t(M * N), 0.0f);
            const MatmulArgs args{M, N, K, layout[0] == 't', layout[1] == 't', false, nullptr, p};
            const double s = typical_seconds(3, [&] { cpu_device().matmul(a.data(), b.data(), c.data(), args); });
            rates.push_back(2.0 * double(M) * double(N) * double(K) / s / 1e12);
          }
    }
}

void measure_compute(Hardware& h, int threads) {
  omp_set_num_threads(threads);
  measure_matmul_grid(h);
  h.matmul_tflops_f32 = matmul_tflops(Precision::f32);
  h.matmul_tflops_bf16 = matmul_tflops(Precision::bf16);
  h.bf16_products = cpu_device().bf16_products();
  h.memory_gbs = memory_gbs();
  measure_kernels(h);
}

}  // namespace

Hardware calibrate_this_machine(int ranks_per_node, int threads_per_rank) {
  Hardware h;
  h.name = "this machine";
  h.source = "measured";
  const int cores = omp_get_max_threads();
  const int threads = threads_per_rank > 0 ? threads_per_rank : std::max(1, cores / std::max(1, ranks_per_node));
  // Every rank of the node measures at once (before this process runs any OpenMP region, so that the
  // copies start clean): the figures are one rank's with the others busy beside it, as in a job.
  std::vector<pid_t> others;
  for (int r = 1; r < ranks_per_node; ++r) {
    const pid_t pid = fork();
    require(pid >= 0, "dtrain plan --calibrate: cannot start the other ranks' measurements");
    if (pid == 0) {
      Hardware scratch;
      measure_compute(scratch, threads);
      std::_Exit(0);
    }
    others.push_back(pid);
  }
  measure_compute(h, threads);
  for (pid_t pid : others) waitpid(pid, nullptr, 0);
  // what a process holds besides its model once its kernels have run (their libraries, threads, scratch)
  h.process_gib = double(resident_bytes()) / double(1 << 30);
  omp_set_num_threads(cores);
  const size_t avail = available_host_bytes();
  h.memory_gib = double(avail == SIZE_MAX ? 0 : avail) / double(1 << 30) / std::max(1, ranks_per_node);
  h.ranks_per_node = std::max(1, ranks_per_node);
  h.rank_slots = std::max(1, cores / threads);
  h.intra = measure_node_link(h, h.ranks_per_node);
  h.inter = h.intra;  // one machine: no network measured (give a cluster's in its profile)
  h.algorithm = "ring";
  char name[128];
  std::snprintf(name, sizeof name, "this machine (%d cores, %d rank%s of %d thread%s)", cores, h.ranks_per_node,
                h.ranks_per_node == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
  h.name = name;
  return h;
}

}  // namespace dtrain
