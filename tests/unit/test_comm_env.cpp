// Where a process finds its rank: dtrun/torchrun variables, SLURM's srun, OpenMPI's mpirun, or
// none (one process); malformed values give one line naming the variable. parallel.backend's
// choice from the device and the launcher, and its refusals.
#include <gtest/gtest.h>

#include <map>

#include "comm/backend_choice.hpp"
#include "comm/env.hpp"
#include "error_of.hpp"

using namespace dtrain;

namespace {

DistEnv detect(const std::map<std::string, std::string>& vars) {
  return detect_env([&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST(DistEnv, NoVariablesMeansOneProcess) {
  DistEnv e = detect({});
  EXPECT_EQ(e.world_size, 1);
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.launcher, "single process");
}

TEST(DistEnv, DtrunAndTorchrunVariables) {
  DistEnv e = detect({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                      {"GROUP_RANK", "1"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"},
                      {"DTRAIN_AGENT", "1"}, {"DTRAIN_JOB_TOKEN", "secret"}, {"DTRAIN_STORE_PREFIX", "r2/"},
                      {"DTRAIN_RESTART_COUNT", "2"}});
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29400);
  EXPECT_EQ(e.token, "secret");
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.launcher, "dtrun");
  EXPECT_EQ(e.store_prefix, "r2/");
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_EQ(e.describe(), "rank 5 of 8 (local 1 of 4, node 1) via dtrun");
  DistEnv t = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_FALSE(t.agent_store);  // torchrun-style: rank 0 hosts the store
  EXPECT_EQ(t.launcher, "torchrun-style variables");
}

TEST(DistEnv, SlurmStepVariables) {
  DistEnv e = detect({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "6"},
                      {"SLURM_NTASKS", "8"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_LOCALID", "2"},
                      {"SLURM_NODEID", "1"}, {"SLURM_STEP_NUM_NODES", "2"},
                      {"SLURM_STEP_NODELIST", "gpu[07-08]"}});
  EXPECT_EQ(e.launcher, "SLURM");
  EXPECT_EQ(e.rank, 6);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 29500 + 4242 % 1000);
  // the batch script itself (no step) is not a rank of anything
  EXPECT_EQ(detect({{"SLURM_JOB_ID", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).world_size, 1);
}

TEST(DistEnv, OpenMpiVariables) {
  DistEnv e = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(e.launcher, "OpenMPI");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  const std::string across = error_of([] {
    detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  });
  EXPECT_NE(across.find("set MASTER_ADDR"), std::string::npos) << across;
}

TEST(DistEnv, MalformedValuesNameTheVariable) {
  EXPECT_NE(error_of([] { detect({{"RANK", "x"}, {"WORLD_SIZE", "2"}}); }).find("RANK='x'"), std::string::npos);
  EXPECT_NE(error_of([] { detect({{"RANK", "2"}, {"WORLD_SIZE", "2"}}); }).find("not below the world size"),
            std::string::npos);
  EXPECT_NE(error_of([] { detect({{"RANK", "0"}}); }).find("RANK and WORLD_SIZE must be set together"),
            std::string::npos);
  EXPECT_NE(error_of([] { detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}}); }).find("MASTER_PORT"),
            std::string::npos);
}

// dtrun marks an elastic job's workers with DTRAIN_ELASTIC=MIN:MAX; anything else is one line.
TEST(DistEnv, ElasticJobsAreMarked) {
  EXPECT_FALSE(detect({}).elastic);
  const DistEnv e = detect({{"DTRAIN_ELASTIC", "2:4"}});
  EXPECT_TRUE(e.elastic);
  EXPECT_EQ(e.elastic_nodes, "2:4");
  EXPECT_TRUE(detect({{"DTRAIN_ELASTIC", "1:1"}}).elastic);
  for (const char* bad : {"4", "4:2", "0:2", "a:b", "2:", ":3"}) {
    const std::string e = error_of([&] { detect({{"DTRAIN_ELASTIC", bad}}); });
    EXPECT_NE(e.find(std::string("DTRAIN_ELASTIC='") + bad + "' is not MIN:MAX"), std::string::npos) << e;
  }
}

// Every number a launcher hands over is checked where it is read: one line naming the variable and
// the range it must be in (a port to connect to is never 0).
TEST(DistEnv, NumbersOutOfRangeNameTheVariableAndTheRange) {
  const auto err = [](std::map<std::string, std::string> vars) { return error_of([&] { detect(vars); }); };
  for (const char* port : {"0", "65536", "70000", "-1", "29500x", " 29500", ""}) {
    const std::string e = err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", port}});
    if (std::string(port).empty()) {
      EXPECT_EQ(e, "");  // unset: the default
    } else {
      EXPECT_NE(e.find("MASTER_PORT='" + std::string(port) + "' is not a whole number from 1 to 65535"),
                std::string::npos)
          << e;
    }
  }
  EXPECT_EQ(detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "65535"}}).master_port, 65535);
  EXPECT_NE(err({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).find("RANK='-1' is not a whole number from 0 to 1073741823"),
            std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE='0' is not a whole number from 1 to 1073741824"),
            std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "99999999999999999999"}}).find("WORLD_SIZE='99999999999999999999'"),
            std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "0"}}).find("LOCAL_WORLD_SIZE='0'"),
            std::string::npos);
  EXPECT_NE(err({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DTRAIN_RESTART_COUNT", "-2"}}).find("DTRAIN_RESTART_COUNT='-2'"),
            std::string::npos);
  EXPECT_NE(err({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "4x"}}).find("OMPI_COMM_WORLD_RANK='4x'"),
            std::string::npos);
  const std::map<std::string, std::string> slurm{{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                                {"SLURM_STEP_NODELIST", "n[1-2]"}};
  auto with = [&](const std::string& k, const std::string& v) {
    auto m = slurm;
    m[k] = v;
    return m;
  };
  EXPECT_NE(err(with("SLURM_NODEID", "-3")).find("SLURM_NODEID='-3'"), std::string::npos);
  EXPECT_NE(err(with("SLURM_STEP_NUM_NODES", "0")).find("SLURM_STEP_NUM_NODES='0'"), std::string::npos);
  EXPECT_NE(err(with("SLURM_JOB_ID", "4294967296")).find("SLURM_JOB_ID='4294967296' is not a whole number from 0 to "
                                                         "4294967295"),
            std::string::npos);
  const DistEnv big_job = detect(with("SLURM_JOB_ID", "4294967295"));  // beyond an int, within SLURM's ids
  EXPECT_EQ(big_job.master_port, 29500 + 295);
  EXPECT_NE(big_job.token.find("4294967295"), std::string::npos);
}

TEST(DistEnv, SlurmNodeListsExpand) {
  EXPECT_EQ(expand_slurm_nodelist("gpu[01-03,07],login1"),
            (std::vector<std::string>{"gpu01", "gpu02", "gpu03", "gpu07", "login1"}));
  EXPECT_EQ(expand_slurm_nodelist("n[8-10]-ib"), (std::vector<std::string>{"n8-ib", "n9-ib", "n10-ib"}));
  EXPECT_EQ(expand_slurm_nodelist("localhost"), (std::vector<std::string>{"localhost"}));
  EXPECT_NE(error_of([] { expand_slurm_nodelist("gpu[01-"); }).find("malformed"), std::string::npos);
}

TEST(CommBackend, AutoIsNcclOnGpusElseGloo) {
  const DistEnv one = detect({});
  EXPECT_EQ(choose_comm_backend("auto", false, one), CommBackend::gloo);
  EXPECT_EQ(choose_comm_backend("auto", true, one), CommBackend::nccl);
  EXPECT_EQ(choose_comm_backend("gloo", false, one), CommBackend::gloo);
  EXPECT_EQ(choose_comm_backend("nccl", true, one), CommBackend::nccl);
}

TEST(CommBackend, MpiNeedsAnMpiLauncher) {
  const DistEnv ompi = detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_TRUE(ompi.mpi_launched);
  EXPECT_EQ(choose_comm_backend("mpi", false, ompi), CommBackend::mpi);
  // srun --mpi=pmix: SLURM's variables and PMIx's
  const DistEnv pmix = detect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"},
                               {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_NODELIST", "n1"}, {"PMIX_RANK", "1"}});
  EXPECT_TRUE(pmix.mpi_launched);
  EXPECT_EQ(choose_comm_backend("mpi", false, pmix), CommBackend::mpi);
  const DistEnv srun = detect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "1"}, {"SLURM_STEP_NUM_TASKS", "2"},
                               {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_NODELIST", "n1"}});
  EXPECT_FALSE(srun.mpi_launched);
  const DistEnv dtrun = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"DTRAIN_AGENT", "1"}});
  for (const auto& [env, by] : {std::pair{srun, "started by SLURM"}, {dtrun, "started by dtrun"},
                                {detect({}), "started alone"}}) {
    const std::string e = error_of([&] { choose_comm_backend("mpi", false, env); });
    EXPECT_NE(e.find(std::string("parallel.backend = mpi needs ranks that an MPI launcher started, and this process "
                                 "was ") + by + ": launch with `mpirun -np N dtrain train ...` or `srun --mpi=pmix "
                                 "dtrain train ...`"),
              std::string::npos)
        << e;
  }
}

TEST(CommBackend, ChoicesThatCannotWorkAreNamedWithTheFix) {
  const DistEnv one = detect({});
  EXPECT_EQ(error_of([&] { choose_comm_backend("nccl", false, one); }),
            "parallel.backend = nccl needs a CUDA device (train.device = cuda): on the CPU use gloo or mpi (auto "
            "picks gloo)");
  EXPECT_EQ(error_of([&] { choose_comm_backend("gloo", true, one); }),
            "parallel.backend = gloo reduces host memory and cannot serve a GPU (train.device = cuda, or auto on a node "
            "with GPUs): use nccl (or auto) on GPUs, or train.device = cpu");
  EXPECT_NE(error_of([&] { choose_comm_backend("mpi", true, one); }).find("use nccl (or auto)"), std::string::npos);
  EXPECT_EQ(error_of([&] { choose_comm_backend("ucc", false, one); }),
            "parallel.backend = \"ucc\" is not one of auto, gloo, nccl, mpi: pick one of them");
}
