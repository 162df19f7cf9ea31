// Synthesized plans in communicators: 8 thread ranks on the DGX-1 reference topology
// (NCCL_TOPO_FILE) with WEFT_SYNTH=1 pick synthesized plans, give exact results, store them in
// the disk cache and read them back at the next init; NCCL_ALGO excludes them; a corrupt cache
// entry is rebuilt. ncclGroupSimulateEnd estimates grouped calls without running them.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/comms.h"
#include "tests/support/scoped_env.h"
#include "tests/support/text_file.h"
#include "tests/support/values.h"

using namespace weft::test;

namespace {

std::string tempDir(const char* pattern) {
  std::string p = pattern;
  std::vector<char> buf(p.begin(), p.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : std::string("/tmp");
}

const std::string& workDir() {
  static const std::string dir = tempDir("/tmp/weft-synth-comm-XXXXXX");
  return dir;
}
std::string logPath() { return workDir() + "/log.txt"; }
std::string cacheDir() { return workDir() + "/cache"; }

class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override { std::system(("rm -rf " + workDir()).c_str()); }
};

// Before the first communicator: the DGX-1 topology, synthesis on, INFO to a file.
const bool kConfigured = [] {
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", logPath().c_str(), 1);
  setenv("NCCL_TOPO_FILE", WEFT_SOURCE_DIR "/tests/golden/topologies/dgx1-v100.xml", 1);
  setenv("WEFT_SYNTH", "1", 1);
  setenv("WEFT_CACHE_DIR", cacheDir().c_str(), 1);
  ::testing::AddGlobalTestEnvironment(new Cleanup);
  return true;
}();

// Counts with many small factors, so every synthesized plan cuts them into whole chunks:
// allgather 8 x 161280 x 4 B = 5 MiB of output, allreduce 1290240 x 4 B = 5 MiB.
constexpr size_t kAllGatherCount = 161280;
constexpr size_t kAllReduceCount = 1290240;

// Runs allgather and allreduce, in and out of place; returns how many calls used a synthesized
// plan (each rank logs its first use of a plan per call shape).
size_t runAndCountSynthesized(const std::vector<ncclComm_t>& comms) {
  LogWatch log(logPath());
  for (bool inPlace : {false, true}) {
    expectExact(comms,
                CheckCase{Coll::kAllGather, ncclInt32, ncclSum, kAllGatherCount, 0, inPlace});
    expectExact(comms,
                CheckCase{Coll::kAllReduce, ncclInt32, ncclSum, kAllReduceCount, 0, inPlace});
  }
  return occurrences(log.text(), " uses synth:");
}

TEST(SynthComm, Dgx1PlansRunExactlyAndComeFromTheDiskCacheNextTime) {
  ASSERT_TRUE(kConfigured);
  {
    LogWatch log(logPath());
    Comms comms(8);
    const std::string init = log.text();
    ASSERT_NE(init.find("synthesized plans from synthesized in"), std::string::npos) << init;
    EXPECT_NE(init.find("stored in " + cacheDir() + "/"), std::string::npos) << init;
    EXPECT_EQ(runAndCountSynthesized(comms.get()), 4u * 8) << readFile(logPath());
  }
  {
    // Every communicator is gone: the next init reads the plans back from disk.
    LogWatch log(logPath());
    Comms comms(8);
    const std::string init = log.text();
    EXPECT_NE(init.find("synthesized plans from disk cache " + cacheDir() + "/"), std::string::npos)
        << init;
    EXPECT_EQ(runAndCountSynthesized(comms.get()), 4u * 8);
  }
  {
    ScopedEnv algo("NCCL_ALGO", "^synth");
    Comms comms(8);
    EXPECT_EQ(runAndCountSynthesized(comms.get()), 0u);
  }
  {
    ScopedEnv algo("NCCL_ALGO", "allgather:synth");
    Comms comms(8);
    LogWatch log(logPath());
    // Forced: allgather takes the synthesized plan; allreduce is left to the selector.
    expectExact(comms.get(),
                CheckCase{Coll::kAllGather, ncclInt32, ncclSum, kAllGatherCount, 0, false});
    EXPECT_EQ(occurrences(log.text(), "allgather of 161280 x 4 bytes uses synth:"), 8u);
  }
}

TEST(SynthComm, CorruptCacheEntryIsIgnoredAndRebuilt) {
  { Comms comms(8); }  // makes sure the entry exists
  // Damage every plan file of every entry.
  const std::string list = workDir() + "/plans.txt";
  ASSERT_EQ(std::system(("find " + cacheDir() + " -name '*.xml' > " + list).c_str()), 0);
  std::istringstream files(readFile(list));
  std::string file;
  int damaged = 0;
  while (std::getline(files, file)) {
    std::ofstream(file, std::ios::trunc) << "<algo name=\"broken\"";
    ++damaged;
  }
  ASSERT_GT(damaged, 0);
  LogWatch log(logPath());
  Comms comms(8);
  const std::string init = log.text();
  EXPECT_NE(init.find("ignored"), std::string::npos) << init;
  EXPECT_NE(init.find("synthesized plans from synthesized in"), std::string::npos) << init;
  EXPECT_EQ(runAndCountSynthesized(comms.get()), 4u * 8);
}

// Estimated time of `calls` grouped allreduces of `count` floats on every rank.
ncclResult_t simulateGroup(const std::vector<ncclComm_t>& comms, size_t count, int calls,
                           ncclSimInfo_t* info, std::vector<std::vector<float>>* recv) {
  recv->assign(comms.size(), std::vector<float>(count, -7.0f));
  std::vector<std::vector<float>> send(comms.size(), std::vector<float>(count, 1.0f));
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  for (int k = 0; k < calls; ++k)
    for (size_t r = 0; r < comms.size(); ++r)
      EXPECT_EQ(ncclAllReduce(send[r].data(), (*recv)[r].data(), count, ncclFloat32, ncclSum,
                              comms[r], nullptr),
                ncclSuccess);
  return ncclGroupSimulateEnd(info);
}

TEST(SynthComm, GroupSimulateEndEstimatesWithoutRunning) {
  Comms comms(8);
  std::vector<std::vector<float>> recv;
  ncclSimInfo_t one = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(simulateGroup(comms.get(), 1 << 20, 1, &one, &recv), ncclSuccess)
      << ncclGetLastError(nullptr);
  // Nothing ran: the output buffers still hold what they were filled with.
  for (const auto& r : recv)
    for (float v : r) ASSERT_EQ(v, -7.0f);
  // 4 MiB over DGX-1 NVLinks: above the allreduce bound (8 MiB in and out of every GPU at
  // 150 GB/s, 2 x 7/8 x 4 MiB / 150 GB/s = 49 us) and far below a slow link's time.
  EXPECT_GT(one.estimatedTime, 48.0f);
  EXPECT_LT(one.estimatedTime, 1000.0f);

  ncclSimInfo_t three = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(simulateGroup(comms.get(), 1 << 20, 3, &three, &recv), ncclSuccess);
  EXPECT_NEAR(three.estimatedTime, 3 * one.estimatedTime, 0.01 * three.estimatedTime);
  ncclSimInfo_t bigger = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(simulateGroup(comms.get(), 4 << 20, 1, &bigger, &recv), ncclSuccess);
  EXPECT_GT(bigger.estimatedTime, 3 * one.estimatedTime);

  // The communicators still work afterwards.
  expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 1000, 0, false});
}

TEST(SynthComm, GroupSimulateEndOfSendAndRecv) {
  Comms comms(2);                // GPUs 0 and 1 of the DGX-1: two NVLinks, 50 GB/s
  const size_t count = 1 << 18;  // 1 MiB of floats
  std::vector<float> data(count, 3.0f), out(count, -1.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(data.data(), count, ncclFloat32, 1, comms.get()[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(out.data(), count, ncclFloat32, 0, comms.get()[1], nullptr), ncclSuccess);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_GT(info.estimatedTime, 1048576 / 50e3);  // 21 us at 50 GB/s, plus the latency
  EXPECT_LT(info.estimatedTime, 1048576 / 50e3 + 5);
  for (float v : out) ASSERT_EQ(v, -1.0f);
}

TEST(SynthComm, GroupSimulateEndRejectsMisuse) {
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclInvalidUsage);  // no group
  EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument);
  Comms comms(2);
  std::vector<float> a(64, 1.0f), b(64, 1.0f), out0(64), out1(64);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.data(), out0.data(), 64, ncclFloat32, ncclSum, comms.get()[0], nullptr),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.data(), out1.data(), 64, ncclFloat32, ncclSum, comms.get()[1], nullptr),
            ncclSuccess);
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  EXPECT_EQ(ncclGroupSimulateEnd(&bad), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_SIM_INFO_INITIALIZER"),
            std::string::npos);
  // The group is still open: a plain End runs the calls.
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(out0[i], 2.0f);
    ASSERT_EQ(out1[i], 2.0f);
  }
}

}  // namespace
