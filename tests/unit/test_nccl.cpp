// The NCCL process group at world size 1 (one GPU is what we have): every operation of the
// process-group API on device buffers, ordered with the compute stream, through the store
// bootstrap. Skipped without a GPU.
#include <unistd.h>

#include <filesystem>

#include "comm/file_store.hpp"
#include "comm/process_group.hpp"
#include "core/cuda_backend.hpp"
#include "gpu_test_util.hpp"

using namespace dtrain;
using gpu_test::OnDevice;

TEST(Nccl, EveryOperationAtWorldSizeOne) {
  NEED_GPU();
  const std::string dir = "/tmp/dtrain_nccl_test_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  FileStore store(dir, "token");
  PrefixStore scoped(store.clone(), "pg/0.nccl/");
  ProcessGroup pg("nccl", {0}, 0, Millis(30000), nullptr,
                  cuda_backend("the NCCL test").connect_nccl(scoped, 0, 1, G.index(), G.stream(), Millis(30000),
                                                             "nccl"));
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
  OnDevice<float> got(G, std::vector<float>(4, 0.0f));
  auto s = pg.send_async(x.p(), 16, 0);
  auto r = pg.recv_async(got.p(), 16, 0);
  r->wait();
  s->wait();
  EXPECT_EQ(got.host(), h) << "send to self, receive from self";
  pg.barrier();
  std::filesystem::remove_all(dir);
}
