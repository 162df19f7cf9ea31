// An MSCCL allpairs allgather for 32 MiB - 1 GiB on 8 ranks (this directory's msccl_pieces/)
// runs on 8 thread ranks with NCCL_ALGO=msccl: its 4 MiB messages outgrow every FIFO, so the
// communicator runs it in slot-sized pieces, and the results are exact. Forced msccl outside
// its window (size, in-place mode, collective) fails with ncclInvalidUsage naming the windows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/comms.h"
#include "tests/support/info_log.h"
#include "tests/support/scoped_env.h"
#include "tests/support/text_file.h"

using namespace weft::test;

namespace {

const std::string kPlans = WEFT_PIECES_FIXTURES;
const std::string kPlanFile = kPlans + "/allpairs_allgather_ll.xml";

TEST(MscclPieces, AllpairsAllGatherPastTheFifoRunsInPiecesAndIsExact) {
  ASSERT_TRUE(kInfoLogRouted);
  LogWatch log(infoLogPath());
  ScopedEnv env({{"MSCCL_ALGO_DIR", kPlans}, {"NCCL_ALGO", "msccl"}});
  Comms comms(8);
  // 32 MiB of floats (4 MiB messages), then 32 MiB + 8 bytes of int8 (an odd count, so chunks
  // cut into uneven parts), out of place as the plan allows.
  const CheckCase cases[] = {{Coll::kAllGather, ncclFloat32, ncclSum, 1u << 20, 0, false},
                             {Coll::kAllGather, ncclInt8, ncclSum, (4u << 20) + 1, 0, false}};
  for (const CheckCase& c : cases) expectExact(comms.get(), c);
  const std::string text = log.text();
  EXPECT_NE(text.find("plan library: loaded " + kPlanFile +
                      ": msccl plan 'allpairs_allgather_ll' (allgather, 8 ranks, "
                      "33554432-1073741824 bytes, out of place only; runs in pieces where its "
                      "messages exceed a FIFO slot)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("messages up to one FIFO slot"), std::string::npos);
  // Every rank logs each plan it builds: 4 MiB messages in 128 KiB slots make 32 pieces; the
  // odd count's chunks of 4194305 bytes, cut on 64-byte boundaries, 33.
  const std::string used = "uses msccl:allpairs_allgather_ll#0 from " + kPlanFile;
  EXPECT_EQ(occurrences(text, "allgather of 1048576 x 4 bytes " + used + " in 32 pieces"), 8u)
      << text;
  EXPECT_EQ(occurrences(text, "allgather of 4194305 x 1 bytes " + used + " in 33 pieces"), 8u)
      << text;
}

// Issues one allgather on every rank in a group and returns ncclGroupEnd's result.
ncclResult_t allGatherOnAll(const std::vector<ncclComm_t>& comms, size_t count, bool inPlace) {
  const size_t n = comms.size();
  std::vector<std::vector<float>> recv(n, std::vector<float>(count * n));
  std::vector<std::vector<float>> send(n, std::vector<float>(count));
  ncclResult_t issued = ncclGroupStart();
  for (size_t r = 0; r < n && issued == ncclSuccess; ++r) {
    const float* in = inPlace ? recv[r].data() + r * count : send[r].data();
    issued = ncclAllGather(in, recv[r].data(), count, ncclFloat32, comms[r], nullptr);
  }
  const ncclResult_t end = ncclGroupEnd();
  return issued != ncclSuccess ? issued : end;
}

TEST(MscclPieces, ForcedMscclWithoutAMatchingPlanFails) {
  ASSERT_TRUE(kInfoLogRouted);
  ScopedEnv env({{"MSCCL_ALGO_DIR", kPlans}, {"NCCL_ALGO", "msccl"}});
  Comms comms(8);
  const std::string window =
      "windows loaded: 'allpairs_allgather_ll' (allgather, 8 ranks, 33554432-1073741824 bytes, "
      "out of place only)";
  // Below the window.
  EXPECT_EQ(allGatherOnAll(comms.get(), 1024, false), ncclInvalidUsage);
  std::string why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("no plan matches this call: 8 ranks, 32768 bytes (1024 x 4), out of place"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(window), std::string::npos) << why;
  // Inside the window, but in place, which the plan does not allow.
  EXPECT_EQ(allGatherOnAll(comms.get(), 1u << 20, true), ncclInvalidUsage);
  why = ncclGetLastError(nullptr);
  EXPECT_NE(why.find("33554432 bytes (1048576 x 4), in place"), std::string::npos) << why;
  // Another collective.
  CheckResult r =
      runCheck(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 1u << 20, 0, false});
  EXPECT_EQ(r.status, ncclInvalidUsage) << r.message;
  // The communicators stay usable: NCCL_ALGO=msccl only refused those calls.
  CheckResult ok =
      runCheck(comms.get(), CheckCase{Coll::kAllGather, ncclFloat32, ncclSum, 1u << 20, 0, false});
  EXPECT_EQ(ok.status, ncclSuccess) << ok.message;
  EXPECT_EQ(ok.wrong, 0u) << ok.message;
}

}  // namespace
