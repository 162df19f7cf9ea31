// What every task of a Slurm step derives alike: the first host of the step's node list and the
// rendezvous port; and what weftGetUniqueIdFromEnv makes of launchers' variables.
#include "src/api/launch_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "nccl.h"
#include "weft/weft.h"

namespace weft::api::launchenv {
namespace {

TEST(FirstSlurmHost, NamesTheFirstHostOfTheList) {
  EXPECT_EQ(firstSlurmHost("login"), "login");
  EXPECT_EQ(firstSlurmHost("localhost,other"), "localhost");
  EXPECT_EQ(firstSlurmHost("node[07-09,12],gpu1"), "node07");
  EXPECT_EQ(firstSlurmHost("node[12,3-4]"), "node12");
  EXPECT_EQ(firstSlurmHost("node[001-128]"), "node001");  // zero padding kept
  EXPECT_EQ(firstSlurmHost("rack[2-3]n[5,8]-ib"), "rack2n5-ib");
  EXPECT_EQ(firstSlurmHost("a-[1-3]"), "a-1");
  EXPECT_EQ(firstSlurmHost("n[4]"), "n4");
}

TEST(FirstSlurmHost, MalformedListsGiveNothing) {
  EXPECT_EQ(firstSlurmHost(""), "");
  EXPECT_EQ(firstSlurmHost("node[01-04"), "");
  EXPECT_EQ(firstSlurmHost("node]1"), "");
  EXPECT_EQ(firstSlurmHost("node[]"), "");
  EXPECT_EQ(firstSlurmHost("node[x-y]"), "");
}

TEST(SlurmPort, SameStepSamePortInRange) {
  EXPECT_EQ(slurmPort("4711", "0"), slurmPort("4711", "0"));
  std::set<uint16_t> ports;
  for (int job = 1000; job < 1020; ++job)
    for (int step = 0; step < 5; ++step) {
      uint16_t p = slurmPort(std::to_string(job), std::to_string(step));
      EXPECT_GE(p, kSlurmPortBase);
      EXPECT_LT(p, kSlurmPortBase + kSlurmPortSpan);
      ports.insert(p);
    }
  // Steps of one job and neighbouring jobs spread over the range (100 draws from 4000 ports).
  EXPECT_GT(ports.size(), 90u);
  // "1.23" and "12.3" are different steps.
  EXPECT_NE(slurmPort("1", "23"), slurmPort("12", "3"));
}

}  // namespace
}  // namespace weft::api::launchenv

// weftGetUniqueIdFromEnv as a process of rank 1 sees it (rank 1 serves nothing, so nothing binds).
namespace {

const char* const kLauncherVariables[] = {"WEFT_RANK",
                                          "WEFT_WORLD_SIZE",
                                          "WEFT_LOCAL_RANK",
                                          "WEFT_MASTER_ADDR",
                                          "WEFT_MASTER_PORT",
                                          "WEFT_JOB_SECRET",
                                          "RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "TORCHELASTIC_RUN_ID",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "PMI_RANK",
                                          "PMI_SIZE",
                                          "MPI_LOCALRANKID",
                                          "SLURM_PROCID",
                                          "SLURM_STEP_NUM_TASKS",
                                          "SLURM_NTASKS",
                                          "SLURM_LOCALID",
                                          "SLURM_JOB_ID",
                                          "SLURM_STEP_ID",
                                          "SLURM_STEP_NODELIST",
                                          "SLURM_JOB_NODELIST",
                                          "SLURM_NODELIST",
                                          "SLURM_CLUSTER_NAME"};

class FromEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kLauncherVariables) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  void srunTask(const char* rank, const char* job, const char* step) {
    setenv("SLURM_PROCID", rank, 1);
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_LOCALID", rank, 1);
    setenv("SLURM_JOB_ID", job, 1);
    setenv("SLURM_STEP_ID", step, 1);
    setenv("SLURM_STEP_NODELIST", "localhost,node[2-4]", 1);
  }
  // The id, or "" with the error text in `error`.
  std::string derive(int* rank = nullptr, int* size = nullptr) {
    ncclUniqueId id;
    int r = -1, n = -1;
    if (weftGetUniqueIdFromEnv(&id, &r, &n) != ncclSuccess) {
      error = ncclGetLastError(nullptr);
      return "";
    }
    if (rank) *rank = r;
    if (size) *size = n;
    return std::string(id.internal, sizeof id.internal);
  }
  std::string error;
};

TEST_F(FromEnv, SrunTasksOfOneStepDeriveOneIdAndOtherStepsAnother) {
  srunTask("1", "4711", "0");
  int rank = -1, size = -1;
  std::string id = derive(&rank, &size);
  ASSERT_FALSE(id.empty()) << error;
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 4);
  setenv("SLURM_PROCID", "3", 1);  // another task of the step
  EXPECT_EQ(derive(), id);
  setenv("SLURM_STEP_ID", "1", 1);  // the job's next step
  std::string next = derive();
  ASSERT_FALSE(next.empty()) << error;
  EXPECT_NE(next, id);
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_JOB_ID", "4712", 1);  // another job
  EXPECT_NE(derive(), id);
  setenv("SLURM_JOB_ID", "4711", 1);
  setenv("WEFT_MASTER_PORT", "29999", 1);  // an explicit port wins over the derived one
  EXPECT_NE(derive(), id);
}

TEST_F(FromEnv, TorchrunVariablesWinOverSrunsAndNeedTheirAddress) {
  srunTask("1", "4711", "0");
  setenv("RANK", "2", 1);
  setenv("WORLD_SIZE", "3", 1);
  EXPECT_EQ(derive(), "");  // the ranks are torchrun's, so the address must be too
  EXPECT_NE(error.find("MASTER_ADDR, MASTER_PORT not set"), std::string::npos) << error;
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29998", 1);
  int rank = -1, size = -1;
  EXPECT_NE(derive(&rank, &size), "") << error;
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(size, 3);
}

TEST_F(FromEnv, MpiLaunchersNeedAnAddress) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(derive(), "");
  EXPECT_NE(error.find("MASTER_ADDR"), std::string::npos) << error;
  EXPECT_NE(error.find("weft/weft_mpi.h"), std::string::npos) << error;
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29997", 1);
  int rank = -1, size = -1;
  EXPECT_NE(derive(&rank, &size), "") << error;
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(size, 2);
}

TEST_F(FromEnv, BatchScriptIsNoStep) {
  // sbatch's script: SLURM_PROCID=0 and the job's task count, but no SLURM_STEP_NUM_TASKS.
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_JOB_ID", "4711", 1);
  setenv("SLURM_JOB_NODELIST", "localhost", 1);
  EXPECT_EQ(derive(), "");
  EXPECT_NE(error.find("RANK, WORLD_SIZE"), std::string::npos) << error;
}

TEST_F(FromEnv, BadHostListIsAnError) {
  srunTask("1", "4711", "0");
  setenv("SLURM_STEP_NODELIST", "node[01-", 1);
  EXPECT_EQ(derive(), "");
  EXPECT_NE(error.find("not a Slurm host list"), std::string::npos) << error;
}

}  // namespace
