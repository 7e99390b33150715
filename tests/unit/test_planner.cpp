// The planner's parts: the stand-in mesh (each group as the real mesh has it; operations that move
// nothing, timed on a clock where the code waits), the counting device (addresses that cost nothing,
// every kernel's work told), the collective model, the measured-grid interpolation and the step clock.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/mesh.hpp"
#include "kernels/counting_device.hpp"
#include "parallel/pp/schedule.hpp"
#include "train/config.hpp"
#include "train/plan/fit_note.hpp"
#include "train/plan/hardware.hpp"
#include "train/plan/step_clock.hpp"
#include "train/plan/step_time.hpp"

using namespace dtrain;

TEST(Planner, StandInMeshHoldsEachRanksGroupsAndMovesNothing) {
  const MeshShape shape{2, 2, 2, 2};  // pp 2 × dp_replicate 2 × dp_shard 2 × tp 2
  for (int rank : {0, 5, 15}) {
    const auto mesh = DeviceMesh::stand_in(shape, rank);
    EXPECT_EQ(mesh->coord().tp, mesh_coord(shape, rank).tp);
    for (MeshDim d : {MeshDim::pp, MeshDim::dp_replicate, MeshDim::dp_shard, MeshDim::tp}) {
      const std::vector<int> want = mesh_group(shape, rank, {d});
      EXPECT_EQ(mesh->group(d).ranks(), want);
      EXPECT_EQ(mesh->group(d).ranks()[size_t(mesh->group(d).rank())], rank);
    }
    EXPECT_EQ(mesh->dp().size(), 4);
    float v[3] = {1, 2, 3};
    mesh->group(MeshDim::tp).allreduce(v, 3);
    EXPECT_EQ(v[0], 1.0f);  // nothing reduced
    EXPECT_EQ(v[2], 3.0f);
  }
}

// A clock that charges every operation 2 seconds and counts the compute stream's waits.
struct TestClock : StandInClock {
  double t = 0.0, waited = 0.0;
  double now() override { return t; }
  OpSeconds seconds(const std::string&, double, const std::vector<int>&, const std::string&) override {
    return {2.0, 2.0, 0.0};
  }
  void wait_until(double start, const OpSeconds& s, const std::string&) override {
    const double end = start + s.beside;
    if (end > t) waited += end - t, t = end;
  }
};

TEST(Planner, StandInOperationsRunAfterTheGroupsLastAndHoldUpOnlyWhereWaited) {
  TestClock clock;
  const auto mesh = DeviceMesh::stand_in(MeshShape{1, 2, 1, 1}, 0, &clock);
  ProcessGroup& g = mesh->dp();
  float x = 0.0f;
  clock.t = 1.0;
  WorkPtr a = g.allreduce_async(&x, 1, ElemType::f32, ReduceOp::sum);  // runs 1 → 3
  WorkPtr b = g.allreduce_async(&x, 1, ElemType::f32, ReduceOp::sum);  // after a: 3 → 5
  clock.t = 4.0;                                                        // compute went on meanwhile
  a->wait();
  EXPECT_DOUBLE_EQ(clock.t, 4.0);  // a was over: no wait
  b->wait();
  EXPECT_DOUBLE_EQ(clock.t, 5.0);
  EXPECT_DOUBLE_EQ(clock.waited, 1.0);
}

// A send and a receive use the link's two ways at once; a collective after them waits for both.
TEST(Planner, StandInSendAndReceiveRunTogetherOnTheDuplexLink) {
  TestClock clock;
  const auto mesh = DeviceMesh::stand_in(MeshShape{2, 1, 1, 1}, 0, &clock);
  ProcessGroup& g = mesh->group(MeshDim::pp);
  float x = 0.0f, y = 0.0f;
  WorkPtr sent = g.send_async(&x, sizeof x, 1), got = g.recv_async(&y, sizeof y, 1);  // both 0 → 2
  WorkPtr after = g.allreduce_async(&x, 1, ElemType::f32, ReduceOp::sum);            // 2 → 4
  sent->wait();
  got->wait();
  EXPECT_DOUBLE_EQ(clock.t, 2.0);
  after->wait();
  EXPECT_DOUBLE_EQ(clock.t, 4.0);
}

TEST(Planner, CountingDeviceTakesNoMemoryAndTellsEachKernelsWork) {
  CountingDevice dev;
  void* a = dev.allocate_zeroed(size_t(1) << 36);  // 64 GiB: counted, not taken
  void* b = dev.allocate_zeroed(100);
  EXPECT_NE(a, b);
  EXPECT_EQ(static_cast<const char*>(a)[12345], 0);  // reads find zeros
  EXPECT_EQ(dev.in_use(), (size_t(1) << 36) + 100);
  dev.release(a);
  EXPECT_EQ(dev.in_use(), 100u);
  EXPECT_EQ(dev.peak_bytes(), (size_t(1) << 36) + 100);
  std::vector<KernelWork> seen;
  dev.on_kernel([&](const KernelWork& w) { seen.push_back(w); });
  dev.matmul(nullptr, nullptr, nullptr, linear_forward_args(64, 32, 16, nullptr, Precision::bf16));
  dev.layernorm_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 10, 8, 1e-5f);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_STREQ(seen[0].family, "matmul");
  EXPECT_DOUBLE_EQ(seen[0].flops, 2.0 * 64 * 16 * 32);  // rows 64, in 32, out 16
  EXPECT_EQ(seen[0].precision, Precision::bf16);
  EXPECT_TRUE(seen[0].trans_b);
  EXPECT_STREQ(seen[1].name, "layernorm_forward");
  EXPECT_DOUBLE_EQ(seen[1].bytes, 8.0 * 10 * 8);
}

TEST(Planner, CollectivesFollowTheBusBandwidthConvention) {
  const Link link{10.0, 5.0};  // 10 GB/s, 5 µs a step
  EXPECT_EQ(collective_seconds(Collective::all_reduce, 1e9, 1, link, "ring"), 0.0);
  // ring all-reduce over 4: 2·3 steps, 2·3/4 of the bytes over the bus
  EXPECT_NEAR(collective_seconds(Collective::all_reduce, 1e9, 4, link, "ring"), 6 * 5e-6 + 1.5 * 0.1, 1e-12);
  EXPECT_NEAR(collective_seconds(Collective::all_gather, 1e9, 4, link, "ring"), 3 * 5e-6 + 0.75 * 0.1, 1e-12);
  // a tree's latency grows with log2 n
  EXPECT_NEAR(collective_seconds(Collective::all_reduce, 0.0 + 1, 1024, link, "tree"), 2 * 10 * 5e-6 + 2 * 1023 / 1024e10, 1e-12);
  Hardware h;
  h.ranks_per_node = 4;
  h.intra = {100, 1};
  h.inter = {10, 10};
  EXPECT_EQ(&link_of({0, 1, 2, 3}, h), &h.intra);
  EXPECT_EQ(&link_of({2, 5}, h), &h.inter);
}

TEST(Planner, MeasuredMatmulGridInterpolatesInLogSpace) {
  Hardware h;
  h.matmul_tflops_f32 = 9.0;
  h.grid_rows = {100, 400};
  h.grid_cols = {10, 40};
  std::vector<double> rates(8);
  for (size_t i = 0; i < 8; ++i) rates[i] = double(i + 1);  // (M, N, K) corner (i, j, k) → 4i + 2j + k + 1
  h.matmul_grid["f32.nt"] = rates;
  auto rate = [&](int64_t M, int64_t N, int64_t K) { return h.matmul_rate({M, N, K, false, true, false, nullptr, Precision::f32}); };
  EXPECT_DOUBLE_EQ(rate(100, 10, 10), 1.0);
  EXPECT_DOUBLE_EQ(rate(400, 40, 40), 8.0);
  EXPECT_DOUBLE_EQ(rate(200, 10, 10), 3.0);  // halfway between 100 and 400 in log2
  EXPECT_DOUBLE_EQ(rate(5000, 5, 5), 5.0);   // clamped at the edges
  EXPECT_DOUBLE_EQ(h.matmul_rate({100, 10, 10, false, false, false, nullptr, Precision::f32}), 9.0);  // "nn" not measured
}

// A node whose times read at a glance: its kernels stream 1 GB/s and its link moves 1 GB/s with no
// latency; `ranks` ranks on it.
Hardware plain_node(int ranks = 1) {
  Hardware h;
  h.memory_gbs = 1.0;
  h.intra = {1.0, 0.0};
  h.ranks_per_node = ranks;
  return h;
}

TEST(Planner, StepClockTimesKernelsAndChargesWaitsToTheirGroup) {
  Hardware h = plain_node(8);  // 1e9 B/s
  h.matmul_tflops_f32 = 1.0;   // 1e12 FLOP/s
  h.kernels["layernorm_forward"] = 2.0;  // GB/s
  StepClock clock(h);
  clock.kernel({"matmul", "matmul", 2e12, 0, 10, 10, 10, Precision::f32});
  clock.kernel({"layernorm_forward", "stream", 0.0, 4e9, 0, 0, 0, Precision::f32});
  clock.kernel({"add", "stream", 0.0, 1e9, 0, 0, 0, Precision::f32});
  clock.kernel({"adamw_update", "optimizer", 0.0, 3e9, 0, 0, 0, Precision::f32});
  StepClockTally t = clock.tally();
  EXPECT_DOUBLE_EQ(t.compute, 2.0 + 2.0 + 1.0);
  EXPECT_DOUBLE_EQ(t.optimizer, 3.0);
  EXPECT_DOUBLE_EQ(clock.seconds("allreduce", 1e9, {0, 1}, "dp_shard").alone, 1.0);  // 2·1/2 of 1 GB at 1 GB/s
  clock.wait_until(8.0, {2.0, 2.0}, "dp_shard");  // issued when the compute stream stood at 8
  clock.wait_until(10.5, {0.5, 0.5}, "tp");
  t = clock.tally();
  EXPECT_DOUBLE_EQ(t.end, 11.0);
  EXPECT_DOUBLE_EQ(t.waited["dp"], 2.0);
  EXPECT_DOUBLE_EQ(t.waited["tp"], 1.0);
  // on a CPU node the communication beside the computation slows it by the share of its steal that
  // ran beside it
  StepClock busy(h);
  busy.kernel({"add", "stream", 0.0, 4e9, 0, 0, 0, Precision::f32});  // compute until 4
  busy.wait_until(1.0, {2.0, 2.0, 0.0, 1.0}, "dp");  // ran 1 → 3 beside it: its 1 s lost, no wait
  EXPECT_DOUBLE_EQ(busy.tally().end, 5.0);
  busy.wait_until(4.5, {2.5, 2.5, 0.0, 1.25}, "tp");  // a fifth beside it (0.25 lost), then waited for 2
  EXPECT_DOUBLE_EQ(busy.tally().end, 7.25);
}

// What a collective takes of the computation beside it is measured by size, not as a share of its
// time: a small one, as long as a large one while its threads wake and wait, takes far less.
TEST(Planner, StepClockStealsByTheBytesAsMeasured) {
  Hardware h = plain_node(2);
  h.allreduce_bytes = {1e3, 1e6};
  h.allreduce_seconds = {3e-3, 4e-3};
  h.allreduce_steal_seconds = {1e-5, 1e-3};
  StepClock clock(h);
  const OpSeconds small = clock.seconds("allreduce", 1e3, {0, 1}, "tp");
  const OpSeconds large = clock.seconds("allreduce", 1e6, {0, 1}, "dp");
  EXPECT_DOUBLE_EQ(small.beside, 3e-3);  // nearly as long as the large one,
  EXPECT_DOUBLE_EQ(small.steal, 1e-5);   // but it takes a hundredth of the computation
  EXPECT_DOUBLE_EQ(large.steal, 1e-3);
  // between: linear in the logarithm of the bytes, as the time
  EXPECT_NEAR(clock.seconds("allreduce", std::sqrt(1e9), {0, 1}, "dp").steal, 5.05e-4, 1e-12);
  EXPECT_DOUBLE_EQ(clock.seconds("allreduce", 2e6, {0, 1}, "dp").steal, 2e-3);  // past the curve: its last rate
  h.allreduce_steal_seconds.clear();  // unmeasured: nothing taken
  EXPECT_DOUBLE_EQ(StepClock(h).seconds("allreduce", 1e6, {0, 1}, "dp").steal, 0.0);
}

// Processor sharing: an operation runs at its `beside` speed while the rank computes, at its `alone`
// speed once the compute stream waits for it; a kernel measured without dropout stands in for its
// dropout variant.
TEST(Planner, StepClockSharesTheCoresAndFallsBackToTheKernelWithoutDropout) {
  Hardware h = plain_node();
  h.kernels["attention_forward"] = 1.0;  // TFLOP/s
  StepClock clock(h);
  clock.kernel({"attention_forward.dropout", "attention", 2e12, 0.0, 1, 1, 1, Precision::f32});
  EXPECT_DOUBLE_EQ(clock.tally().end, 2.0);  // the rate measured without dropout
  EXPECT_DOUBLE_EQ(clock.tally().kernels["attention_forward.dropout"], 2.0);
  clock.wait_until(1.0, {2.0, 4.0}, "tp");  // a quarter done beside the computation (1 → 2), the rest alone
  EXPECT_DOUBLE_EQ(clock.tally().end, 2.0 + 0.75 * 2.0);
  clock.wait_until(9.0, {1.0, 1.0}, "tp");  // starts after the stream's time: waited until it, then all of it
  EXPECT_DOUBLE_EQ(clock.tally().end, 10.0);
}

// With jitter, ranks that computed apart reach a collective apart: the slowest of n comes
// jitter · E[max of n normals] · (compute since they last met) after this one.
TEST(Planner, StepClockLagGrowsWithTheComputeSinceTheRanksLastMet) {
  Hardware h = plain_node(8);
  h.jitter = 0.1;
  StepClock clock(h);
  clock.kernel({"add", "stream", 0.0, 10e9, 0, 0, 0, Precision::f32});  // 10 s of compute
  const double two = clock.seconds("allreduce", 0.0, {0, 1}, "tp").lag, four = clock.seconds("allreduce", 0.0, {0, 1, 2, 3}, "tp").lag;
  EXPECT_NEAR(two, 0.1 * 0.5642 * 10.0, 1e-3);
  EXPECT_NEAR(four, 0.1 * 1.0294 * 10.0, 1e-3);
  clock.wait_until(10.0 + two, {0.0, 0.0, two}, "tp");  // waited for the other rank: they meet
  EXPECT_DOUBLE_EQ(clock.seconds("allreduce", 0.0, {0, 1}, "tp").lag, 0.0);
  h.jitter = 0.0;  // a GPU profile: no lag
  EXPECT_DOUBLE_EQ(StepClock(h).seconds("allreduce", 0.0, {0, 1}, "tp").lag, 0.0);
}

// Measured at a span of 2.5 s with growth 0.5 (time slices evening the ranks out): after 10 s apart
// the lead is jitter · E[max] · 2.5 · (10 / 2.5)^0.5, half of what it would be growing with the span.
TEST(Planner, StepClockLagGrowsAsMeasuredWithTheSpan) {
  Hardware h = plain_node();
  h.jitter = 0.1;
  h.jitter_span_s = 2.5;
  h.jitter_growth = 0.5;
  StepClock clock(h);
  clock.kernel({"add", "stream", 0.0, 10e9, 0, 0, 0, Precision::f32});  // 10 s of compute
  EXPECT_NEAR(clock.seconds("allreduce", 0.0, {0, 1}, "tp").lag, 0.1 * 0.5642 * 2.5 * 2.0, 1e-3);
}

// Four ranks of two pipelines on two cores: the profile's rates are those of all four computing; a
// stage computing while the other waits (GPipe's ramps) has the cores its ranks' share gives, up to
// twice those rates. On a node with a core for every rank nothing changes.
TEST(Planner, PipelineStagesComputeFasterWhileOthersWaitOnSharedCores) {
  const Schedule s = make_schedule("gpipe", 2, 1, 2);
  const Simulation sim = simulate(s);  // F 1, B 2: stage 0 alone at the start, stage 1 at the turn
  Hardware h;
  h.ranks_per_node = 4;
  h.rank_slots = 2;
  const std::vector<double> speed = stage_speeds(s, sim, h);
  ASSERT_EQ(speed.size(), 2u);
  for (double v : speed) {
    EXPECT_GT(v, 1.0);
    EXPECT_LE(v, 2.0);
  }
  // stage 0 computes F0 alone of its 6 units (F0 F1 B0 B1 at 1 1 2 2): 1 unit at 2, the rest shared
  // as the timeline shows; whatever the order, its mean lies strictly between
  h.rank_slots = 4;  // a core for each rank
  for (double v : stage_speeds(s, sim, h)) EXPECT_DOUBLE_EQ(v, 1.0);
  h.rank_slots = 0;  // not measured: every rank at full speed
  for (double v : stage_speeds(s, sim, h)) EXPECT_DOUBLE_EQ(v, 1.0);
}

// Four ranks on two cores: a group's late rank computes on while the rest of its group waits, with
// the cores they leave: its lag shrinks by its larger share (all four waiting for one: the one has a
// core, twice the profile's half; two of four: three compute on two cores, 4/3 of the half).
TEST(Planner, StepClockLagShrinksOnSharedCores) {
  Hardware h = plain_node(4);
  h.jitter = 0.1;
  StepClock apart(h);
  apart.kernel({"add", "stream", 0.0, 10e9, 0, 0, 0, Precision::f32});  // 10 s of compute
  const double four = apart.seconds("allreduce", 0.0, {0, 1, 2, 3}, "dp").lag, two = apart.seconds("allreduce", 0.0, {0, 1}, "tp").lag;
  h.rank_slots = 2;
  StepClock shared(h);
  shared.kernel({"add", "stream", 0.0, 10e9, 0, 0, 0, Precision::f32});
  EXPECT_NEAR(shared.seconds("allreduce", 0.0, {0, 1, 2, 3}, "dp").lag, four / 2.0, 1e-9);
  EXPECT_NEAR(shared.seconds("allreduce", 0.0, {0, 1}, "tp").lag, two * 0.75, 1e-9);
}

// `dtrain train`'s out-of-memory note on a GPU: the job's world planned on the profile of the GPU's
// kind with the memory the device says it has (its CUDA context as the profile gives it): a batch
// 141 GiB cannot hold whole fits once every block's activations are recomputed, and the note says so
// with the settings that run it.
TEST(Planner, OutOfMemoryNoteOnAGpuNamesALayoutThatFitsItsMemory) {
  RunConfig cfg;
  cfg.load_toml(std::string(DTRAIN_SOURCE_DIR) + "/configs/quickstart.toml");
  cfg.set("model.vocab_size", "1000");
  cfg.set("train.device", "cuda");
  cfg.set("train.batch_size", "120000");  // 170 GiB whole, 128 GiB with every block recomputed
  const double h200 = 141.0 * double(1 << 30);
  const std::string note = fitting_layout_note(cfg, 1, h200, "h100");
  EXPECT_NE(note.find("the planner finds a layout of 1 rank that fits"), std::string::npos) << note;
  EXPECT_NE(note.find("of 141.0)"), std::string::npos) << note;      // the device's memory
  EXPECT_NE(note.find("--set train.recompute=full"), std::string::npos) << note;  // what makes it fit
  EXPECT_EQ(fitting_layout_note(cfg, 1, 1.0 * double(1 << 30), "h100"), "");  // 1 GiB: nothing fits
}
