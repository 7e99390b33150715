// Which GPU each rank uses, from what every rank sees (stand-in views as GPU nodes would give
// them: dtrun's ranks that all see the node's GPUs, SLURM tasks bound to one GPU each, more ranks
// than GPUs, ranks that resolved train.device = auto differently).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "kernels/gpu_placement.hpp"

using namespace dtrain;

namespace {

const std::vector<std::string> kFour{"0000:1B:00.0", "0000:43:00.0", "0000:52:00.0", "0000:9D:00.0"};

// `n` ranks on `host` from rank `first`, each seeing `visible`, using GPU local_rank % count.
std::vector<RankGpus> node(const std::string& host, int first, int n, const std::vector<std::string>& visible) {
  std::vector<RankGpus> out;
  for (int l = 0; l < n; ++l) {
    RankGpus r;
    r.rank = first + l;
    r.host = host;
    r.visible = visible;
    r.chosen = gpu_index_for("cuda", l, int(visible.size()));
    r.device = "cuda";
    r.why = "auto: " + std::to_string(visible.size()) + " GPUs visible";
    out.push_back(r);
  }
  return out;
}

std::vector<RankGpus> operator+(std::vector<RankGpus> a, const std::vector<RankGpus>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST(GpuPlacement, OneRankPerGpuIsQuiet) {
  const GpuPlacement p = check_gpu_placement(node("gpu01", 0, 4, kFour) + node("gpu02", 4, 4, kFour), false);
  EXPECT_EQ(p.refusal, "");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(GpuPlacement, IdleGpusAreNamedOncePerNode) {
  // the course's first lesson: one rank on a node of four GPUs
  const GpuPlacement p = check_gpu_placement(node("gpu01", 0, 1, kFour) + node("gpu02", 1, 2, kFour), false);
  EXPECT_EQ(p.refusal, "");
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[0].rank, 0);
  EXPECT_EQ(p.warnings[0].line,
            "gpu01: GPU 1 (0000:43:00.0), GPU 2 (0000:52:00.0) and GPU 3 (0000:9D:00.0) are idle: 1 rank uses 1 of "
            "the 4 GPUs visible; start one rank per GPU (dtrun --nproc-per-node N, or srun --ntasks-per-node N with "
            "N = the node's GPUs)");
  EXPECT_EQ(p.warnings[1].rank, 1) << "said by the node's lowest rank";
  EXPECT_NE(p.warnings[1].line.find("GPU 2 (0000:52:00.0) and GPU 3 (0000:9D:00.0) are idle"), std::string::npos)
      << p.warnings[1].line;
}

TEST(GpuPlacement, TasksBoundToOneGpuEachDoNotShare) {
  // srun --gpus-per-task 1: every task sees one GPU, as CUDA index 0, each a different one
  std::vector<RankGpus> ranks;
  for (int r = 0; r < 4; ++r) ranks = ranks + node("gpu01", r, 1, {kFour[size_t(r)]});
  for (RankGpus& r : ranks) r.slurm_gpus_on_node = 4;
  const GpuPlacement p = check_gpu_placement(ranks, false);
  EXPECT_EQ(p.refusal, "");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(GpuPlacement, GpusSlurmGaveButNoRankSeesAreIdle) {
  std::vector<RankGpus> ranks = node("gpu01", 0, 1, {kFour[0]});
  ranks[0].slurm_gpus_on_node = 4;
  const GpuPlacement p = check_gpu_placement(ranks, false);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].line.find("SLURM gives this node 4 GPUs but its 1 rank see 1: 3 idle"), std::string::npos)
      << p.warnings[0].line;
}

TEST(GpuPlacement, TwoRanksOnOneGpuAreRefusedUnlessAllowed) {
  const auto ranks = node("gpu01", 0, 3, {kFour[0], kFour[1]});  // rank 2 wraps onto GPU 0
  const GpuPlacement p = check_gpu_placement(ranks, false);
  EXPECT_EQ(p.refusal,
            "ranks 0 and 2 on gpu01 would share GPU 0 (0000:1B:00.0) (2 GPUs for 3 ranks on the node): start one "
            "rank per GPU (dtrun --nproc-per-node 2, or srun --ntasks-per-node 2), or allow it with --set "
            "train.share_gpus=true (NCCL may still refuse two ranks on one GPU)");
  EXPECT_EQ(check_gpu_placement(ranks, true).refusal, "");
  // the same GPU id on two hosts is two GPUs
  EXPECT_EQ(check_gpu_placement(node("a", 0, 1, kFour) + node("b", 1, 1, kFour), false).refusal, "");
}

TEST(GpuPlacement, RanksThatResolvedAutoDifferentlyAreRefused) {
  auto ranks = node("gpu01", 0, 2, kFour) + node("cpu07", 2, 1, {});
  ranks[2].device = "cpu";
  ranks[2].why = "auto: no GPU visible";
  ranks[2].chosen = -1;
  const GpuPlacement p = check_gpu_placement(ranks, false);
  EXPECT_EQ(p.refusal,
            "train.device = auto chose cuda on rank 0 (gpu01, auto: 4 GPUs visible) but cpu on rank 2 (cpu07, auto: "
            "no GPU visible): give every node GPUs, or set train.device = cpu");
}

TEST(GpuPlacement, ARankThatCannotUseAGpuIsNamed) {
  auto ranks = node("gpu01", 0, 1, kFour) + node("gpu02", 1, 1, {});
  ranks[1].chosen = -1;
  ranks[1].error = "device = \"cuda\" but no GPU is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
  EXPECT_EQ(check_gpu_placement(ranks, false).refusal, "rank 1 on gpu02: " + ranks[1].error);
  EXPECT_EQ(check_gpu_placement({ranks[1]}, false).refusal, ranks[1].error) << "one rank: the error alone";
}

TEST(GpuPlacement, ViewsTravelAsText) {
  RankGpus r = node("gpu01", 3, 1, kFour)[0];
  r.slurm_gpus_on_node = 4;
  r.error = "x \"quoted\"";
  const RankGpus back = decode_rank_gpus(encode_rank_gpus(r));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host, "gpu01");
  EXPECT_EQ(back.visible, kFour);
  EXPECT_EQ(back.chosen, 0);
  EXPECT_EQ(back.slurm_gpus_on_node, 4);
  EXPECT_EQ(back.error, r.error);
  EXPECT_EQ(gpu_index_for("cuda:2", 0, 4), 2);
  EXPECT_EQ(gpu_index_for("cuda:x", 0, 4), -1) << "names no GPU";
  EXPECT_EQ(gpu_index_for("cuda", 5, 4), 1);
}
