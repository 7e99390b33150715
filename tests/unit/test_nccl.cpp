// The NCCL process group at world size 1 (one GPU is what we have): every operation of the
// process-group API on device buffers, ordered with the compute stream, through the store
// bootstrap. Skipped without a GPU.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "comm/file_store.hpp"
#include "comm/process_group.hpp"
#include "core/cuda_backend.hpp"
#include "core/error.hpp"
#include "gpu_test_util.hpp"

using namespace dtrain;
using gpu_test::OnDevice;

namespace {

// An NCCL group of one rank on `G`, bootstrapped through a file store in its own folder.
struct OneRankGroup {
  std::string dir;
  FileStore store;
  PrefixStore scoped;
  ProcessGroup pg;
  OneRankGroup(ComputeDevice& G, const std::string& name)
      : dir(fresh(name)),
        store(dir, "token"),
        scoped(store.clone(), "pg/0.nccl/"),
        pg("nccl", {0}, 0, Millis(30000), nullptr,
           cuda_backend("the NCCL test").connect_nccl(scoped, 0, 1, G.index(), G.stream(), Millis(30000), "nccl")) {}
  ~OneRankGroup() { std::filesystem::remove_all(dir); }
  static std::string fresh(const std::string& name) {
    const std::string d = "/tmp/dtrain_nccl_" + name + "_" + std::to_string(::getpid());
    std::filesystem::remove_all(d);
    return d;
  }
};

}  // namespace

TEST(Nccl, EveryOperationAtWorldSizeOne) {
  NEED_GPU();
  OneRankGroup group(G, "ops");
  ProcessGroup& pg = group.pg;
  std::vector<float> h{1.5f, -2.0f, 3.25f, 7.0f};
  OnDevice<float> x(G, h);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
    pg.allreduce(x.p(), h.size(), op);
    EXPECT_EQ(x.host(), h) << "allreduce " << reduce_op_name(op) << " over one rank changes nothing";
  }
  // async, then a kernel on the compute stream that must see the result
  G.scale(x.p(), 2.0f, 4);
  auto w = pg.allreduce_async(x.p(), 4, ElemType::f32, ReduceOp::sum);
  w->wait();
  G.scale(x.p(), 0.5f, 4);
  EXPECT_EQ(x.host(), h);
  OnDevice<float> out(G, std::vector<float>(4, 0.0f));
  pg.allgather(x.p(), out.p(), 4, ElemType::f32);
  EXPECT_EQ(out.host(), h);
  OnDevice<float> rs(G, std::vector<float>(4, 0.0f));
  pg.reduce_scatter_async(x.p(), rs.p(), {4}, ElemType::f32, ReduceOp::sum)->wait();
  EXPECT_EQ(rs.host(), h);
  pg.broadcast(x.p(), 4, ElemType::f32, 0);
  EXPECT_EQ(x.host(), h);
  // all_to_all over one rank: its own block copied (blocking and async; nothing moves at n = 0)
  OnDevice<float> a2a(G, std::vector<float>(4, 0.0f));
  pg.all_to_all(x.p(), a2a.p(), 4, ElemType::f32);
  EXPECT_EQ(a2a.host(), h);
  OnDevice<float> a2a_async(G, std::vector<float>(4, 0.0f));
  pg.all_to_all_async(x.p(), a2a_async.p(), 4, ElemType::f32)->wait();
  pg.all_to_all(x.p(), a2a_async.p(), 0, ElemType::f32);
  EXPECT_EQ(a2a_async.host(), h);
  // all_to_all_v over one rank: as many elements of its own block copied as its counts say
  // (blocking and async; nothing moves at counts 0)
  OnDevice<float> a2av(G, std::vector<float>(4, 0.0f));
  pg.all_to_all_v(x.p(), {4}, a2av.p(), {4}, ElemType::f32);
  EXPECT_EQ(a2av.host(), h);
  OnDevice<float> a2av_async(G, std::vector<float>(4, 0.0f));
  pg.all_to_all_v_async(x.p(), {3}, a2av_async.p(), {3}, ElemType::f32)->wait();
  pg.all_to_all_v(x.p(), {0}, a2av_async.p(), {0}, ElemType::f32);
  EXPECT_EQ(a2av_async.host(), (std::vector<float>{h[0], h[1], h[2], 0.0f}));
  // At world size 1 there is no peer for a send or a receive: refused in one line.
  EXPECT_THROW(pg.send_async(x.p(), 16, 0), Error);
  pg.barrier();
}

// Stream order: kernels queued before an asynchronous operation are seen by it, and kernels queued
// after its wait see its result, with the host never waiting in between (a 64 MiB buffer rewritten
// by a chain of kernels, then copied out of place by an all-gather, then read by another kernel).
TEST(Nccl, OperationsAreOrderedWithTheComputeStream) {
  NEED_GPU();
  OneRankGroup group(G, "order");
  ProcessGroup& pg = group.pg;
  const size_t n = size_t(16) << 20;
  OnDevice<float> x(G, std::vector<float>(n, 1.0f));
  OnDevice<float> out(G, std::vector<float>(n, 0.0f));
  for (int round = 0; round < 5; ++round) {
    for (int k = 0; k < 20; ++k) G.scale(x.p(), 2.0f, int64_t(n));  // x = 2^20 (then 2^40, ...) times
    auto w = pg.allgather_async(x.p(), out.p(), {n}, ElemType::f32);
    w->wait();
    G.scale(out.p(), 0.5f, int64_t(n));
    G.scale(x.p(), std::ldexp(1.0f, -20), int64_t(n));  // back to 1 for the next round
    const std::vector<float> got = out.host();
    const float want = std::ldexp(1.0f, 19);
    size_t wrong = 0;
    for (float v : got) wrong += v != want;
    ASSERT_EQ(wrong, 0u) << "round " << round << ": elements not 2^19 (the all-gather read x before the kernels "
                         << "queued ahead of it, or the kernel after its wait ran before it)";
  }
  pg.barrier();
}
