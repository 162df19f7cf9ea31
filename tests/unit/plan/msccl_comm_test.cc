// The published MSCCL algorithm files run on 8 thread ranks through the plan library
// (WEFT_PLAN_DIR / MSCCL_ALGO_DIR at communicator init, NCCL_ALGO=msccl) and give exact results;
// a directory holding a broken file still initialises and reports the file.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "nccl.h"
#include "tests/support/collective_check.h"
#include "tests/support/comms.h"
#include "tests/support/grid.h"
#include "tests/support/info_log.h"
#include "tests/support/scoped_env.h"
#include "tests/support/text_file.h"
#include "tests/support/values.h"

using namespace weft::test;

namespace {

const std::string kMsccl = WEFT_SHARED_MSCCL;

// A temporary plan directory, removed with its files.
class PlanDir {
 public:
  PlanDir() {
    char dir[] = "/tmp/weft-msccl-plans-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    path_ = dir;
  }
  ~PlanDir() {
    for (const auto& f : files_) unlink(f.c_str());
    rmdir(path_.c_str());
  }
  std::string add(const std::string& name, const std::string& text) {
    std::string f = path_ + "/" + name;
    std::ofstream(f, std::ios::binary) << text;
    files_.push_back(f);
    return f;
  }
  std::string copy(const std::string& relative) {
    std::string name = relative.substr(relative.find('/') + 1);
    return add(name, readFile(kMsccl + "/" + relative));
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

bool haveShared() {
  struct stat st;
  return ::stat(kMsccl.c_str(), &st) == 0;
}

struct FileCase {
  const char* file;
  const char* plan;
  Coll coll;
  std::vector<size_t> counts;  // inside the file's byte window, dividing into its chunks
  bool streams;                // runs with messages longer than the FIFO
};

class RealFileRuns : public ::testing::TestWithParam<FileCase> {};

TEST_P(RealFileRuns, InPlaceCallsUseThePlanAndAreExact) {
  ASSERT_TRUE(kInfoLogRouted);
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  const FileCase& fc = GetParam();
  PlanDir dir;
  dir.copy(fc.file);
  LogWatch log(infoLogPath());
  ScopedEnv env({{"WEFT_PLAN_DIR", dir.path()}, {"NCCL_ALGO", "msccl"}, {"WEFT_SLOTS", "4"}});
  Comms comms(8);
  for (size_t count : fc.counts) {
    expectExact(comms.get(), CheckCase{fc.coll, ncclFloat32, ncclSum, count, 0, true});
    // Out of place the plan runs on the output after a copy of the input.
    expectExact(comms.get(), CheckCase{fc.coll, ncclFloat32, ncclSum, count, 0, false});
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("plan library: loaded " + dir.path()), std::string::npos) << text;
  EXPECT_EQ(text.find("messages up to one FIFO slot") == std::string::npos, fc.streams);
  const std::string used = std::string("uses msccl:") + fc.plan;
  // Every rank logs the first use of each (count, in place or not) plan.
  EXPECT_EQ(occurrences(text, used), 2 * 8 * fc.counts.size()) << used;
  EXPECT_EQ(occurrences(text, " in place uses msccl:"), 8 * fc.counts.size());
}

INSTANTIATE_TEST_SUITE_P(
    Files, RealFileRuns,
    ::testing::Values(
        // 512 B - 40960 B, 128 chunks.
        FileCase{"ndv4/ap2ll.xml", "allreduce_pairs", Coll::kAllReduce, {128, 1280, 10240}, false},
        // 266240 B - 2078720 B, 64 chunks.
        FileCase{"ndv4/r48ll.xml",
                 "allreduce_ring_4channelsperring",
                 Coll::kAllReduce,
                 {66560, 131072},
                 true},
        // 1 MiB - 2 MiB-1, 16 chunks.
        FileCase{"ndv5/ar-1m.xml", "all_reduce_llm", Coll::kAllReduce, {262144, 393216}, true},
        // 8 x count x 4 B in 1 MiB - 2 MiB-1, 32 chunks of the 8-rank output.
        FileCase{"ndv5/ag-1m.xml", "all_gather_llm", Coll::kAllGather, {32768, 40000}, true}),
    [](const auto& info) {
      std::string n = info.param.file;
      std::string out;
      for (char c : n.substr(n.find('/') + 1))
        if (isalnum(static_cast<unsigned char>(c))) out += c;
      return out;
    });

TEST(PlanLibraryComm, OutsideTheWindowBuiltInsRunInsideEveryOpUsesThePlan) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  PlanDir dir;
  dir.copy("ndv4/ap2ll.xml");
  LogWatch log(infoLogPath());
  ScopedEnv env({{"MSCCL_ALGO_DIR", dir.path()}});
  Comms comms(8);
  // 130 does not split into 128 chunks, 20480 floats are past maxBytes: no plan applies.
  expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 130, 0, true});
  expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 20480, 0, true});
  EXPECT_EQ(occurrences(log.text(), "uses msccl:"), 0u) << log.text();
  // PreMulSum (scale 2) and float Avg scale the input once, in the copy into the output; then
  // integer Avg (sum, then divide), Max and Prod, in place and out of place.
  for (bool inPlace : {true, false}) {
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, -1, 256, 0, inPlace});
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclAvg, 384, 0, inPlace});
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclInt32, ncclAvg, 512, 0, inPlace});
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat64, ncclMax, 640, 0, inPlace});
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclInt8, ncclProd, 768, 0, inPlace});
  }
  EXPECT_EQ(occurrences(log.text(), "uses msccl:allreduce_pairs"), 8u * 10) << log.text();
}

TEST(PlanLibraryComm, RanksMayMixInPlaceAndOutOfPlace) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  PlanDir dir;
  dir.copy("ndv4/ap2ll.xml");
  LogWatch log(infoLogPath());
  ScopedEnv env({{"WEFT_PLAN_DIR", dir.path()}});
  Comms comms(8);
  // Even ranks call in place, odd ranks out of place: every rank still picks the same plan.
  const size_t count = 2560;
  std::vector<std::vector<float>> send(8, std::vector<float>(count)), recv = send;
  for (int r = 0; r < 8; ++r)
    for (size_t i = 0; i < count; ++i) {
      send[r][i] = static_cast<float>(inputValue(ncclFloat32, ncclSum, r, i));
      recv[r][i] = r % 2 ? -1.0f : send[r][i];
    }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 8; ++r) {
    const float* in = r % 2 ? send[r].data() : recv[r].data();
    ASSERT_EQ(
        ncclAllReduce(in, recv[r].data(), count, ncclFloat32, ncclSum, comms.get()[r], nullptr),
        ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 8; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[r][i], expectedReduce(ncclFloat32, ncclSum, 8, i)) << "rank " << r << " " << i;
  EXPECT_EQ(occurrences(log.text(), "uses msccl:allreduce_pairs"), 8u);
}

TEST(PlanLibraryComm, BufferingPlansRunInPiecesPastOneSlot) {
  // Two ranks that each send half their input before receiving the other's (as MSCCL's allpairs
  // does): messages past a slot would block both ranks, so the plan runs in pieces there.
  std::string x =
      "<algo name=\"pair\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
      "coll=\"allreduce\" inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"0\">\n";
  for (int r = 0; r < 2; ++r) {
    const std::string me = std::to_string(r), peer = std::to_string(1 - r);
    x += "<gpu id=\"" + me +
         "\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" "
         "send=\"" +
         peer + "\" recv=\"" + peer +
         "\" chan=\"0\">"
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"" +
         peer +
         "\" dstbuf=\"o\" "
         "dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
         "<step s=\"1\" type=\"rrcs\" srcbuf=\"i\" srcoff=\"" +
         me + "\" dstbuf=\"i\" dstoff=\"" + me +
         "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
         "<step s=\"2\" type=\"r\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"i\" dstoff=\"" +
         peer + "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu>\n";
  }
  PlanDir dir;
  dir.add("pair.xml", x + "</algo>\n");
  LogWatch log(infoLogPath());
  ScopedEnv env({{"WEFT_PLAN_DIR", dir.path()}, {"WEFT_SLOT_BYTES", "4096"}});
  Comms comms(2);
  // 2048 floats make 4 KiB messages (one slot), 4096 floats 8 KiB ones.
  for (bool inPlace : {true, false}) {
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 2048, 0, inPlace});
    expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 4096, 0, inPlace});
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("in place, run on the output; runs in pieces where its messages exceed a "
                      "FIFO slot"),
            std::string::npos)
      << text;
  EXPECT_EQ(occurrences(text, "allreduce of 2048 x 4 bytes"), 4u) << text;
  EXPECT_EQ(occurrences(text, "allreduce of 4096 x 4 bytes"), 4u);
  EXPECT_EQ(occurrences(text, "in 2 pieces"), 4u) << "the 2048-float calls run whole";
  EXPECT_EQ(occurrences(text, "uses msccl:pair#0 from " + dir.path() + "/pair.xml in 2 pieces"), 4u)
      << text;
}

TEST(PlanLibraryComm, StreamingFilesRunWithSmallSlots) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  const FileCase streaming[] = {
      {"ndv4/r48ll.xml", "allreduce_ring_4channelsperring", Coll::kAllReduce, {66560}, true},
      {"ndv5/ar-1m.xml", "all_reduce_llm", Coll::kAllReduce, {262144}, true},
      {"ndv5/ag-1m.xml", "all_gather_llm", Coll::kAllGather, {32768}, true}};
  for (const FileCase& fc : streaming) {
    SCOPED_TRACE(fc.file);
    PlanDir dir;
    dir.copy(fc.file);
    LogWatch log(infoLogPath());
    // Messages of tens of KiB through two 4 KiB slots per connection.
    ScopedEnv env(
        {{"WEFT_PLAN_DIR", dir.path()}, {"WEFT_SLOT_BYTES", "4096"}, {"WEFT_SLOTS", "2"}});
    Comms comms(8);
    expectExact(comms.get(), CheckCase{fc.coll, ncclFloat32, ncclSum, fc.counts[0], 0, true});
    expectExact(comms.get(), CheckCase{fc.coll, ncclFloat32, ncclSum, fc.counts[0], 0, false});
    EXPECT_EQ(occurrences(log.text(), std::string("uses msccl:") + fc.plan), 16u);
  }
}

TEST(PlanLibraryComm, ProcessesOverSharedMemory) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  PlanDir dir;
  dir.copy("ndv4/ap2ll.xml");
  dir.copy("ndv5/ag-1m.xml");
  LogWatch log(infoLogPath());
  // Eight processes of one rank each: the plans' sends and receives cross processes.
  const auto body = [](const std::vector<ncclComm_t>& comms, const std::vector<int>& ranks, int n) {
    for (bool inPlace : {true, false})
      for (const CheckCase& c :
           {CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 2560, 0, inPlace},
            CheckCase{Coll::kAllGather, ncclInt32, ncclSum, 36864, 0, inPlace}}) {
        CheckResult r = runCheckRanks(comms, ranks, n, c);
        if (r.status != ncclSuccess || r.wrong != 0) {
          fprintf(stderr, "%s: %s\n", describe(c, n).c_str(), r.message.c_str());
          return 1;
        }
      }
    return 0;
  };
  const std::string plans = dir.path();
  std::vector<int> codes = forkRanks(8, 1, body, [plans](int) {
    setenv("WEFT_PLAN_DIR", plans.c_str(), 1);
    setenv("NCCL_ALGO", "msccl", 1);
  });
  for (int p = 0; p < 8; ++p) EXPECT_EQ(codes[p], 0) << "process " << p;
  const std::string text = log.text();
  EXPECT_EQ(occurrences(text, "uses msccl:allreduce_pairs"), 16u) << text;
  EXPECT_EQ(occurrences(text, "uses msccl:all_gather_llm"), 16u);
}

TEST(PlanLibraryComm, NcclAlgoCanExcludeTheLibrary) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  PlanDir dir;
  dir.copy("ndv4/ap2ll.xml");
  LogWatch log(infoLogPath());
  ScopedEnv env({{"WEFT_PLAN_DIR", dir.path()}, {"NCCL_ALGO", "^msccl"}});
  Comms comms(8);
  expectExact(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 1280, 0, true});
  EXPECT_EQ(occurrences(log.text(), "uses msccl:"), 0u);
}

TEST(PlanLibraryComm, BrokenFilesAreReportedAndSkipped) {
  ASSERT_TRUE(kInfoLogRouted);
  PlanDir dir;
  const std::string broken = dir.add("broken.xml", "<algo name=\"x\" proto=\"LL\"");
  const std::string idle =
      dir.add("idle.xml",
              "<algo name=\"c\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" "
              "coll=\"allreduce\" inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"0\">"
              "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"/>"
              "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"/></algo>");
  dir.add("notes.txt", "not a plan");
  LogWatch log(infoLogPath());
  ScopedEnv env(
      {{"WEFT_PLAN_DIR", dir.path() + ":/nonexistent/weft-plans"}, {"NCCL_ALGO", "msccl"}});
  {
    Comms comms(2);
    // Nothing loaded, so the forced "msccl" has no plan to run: the call fails, as NCCL's do
    // with a forced algorithm they cannot use.
    CheckResult r =
        runCheck(comms.get(), CheckCase{Coll::kAllReduce, ncclFloat32, ncclSum, 64, 0, true});
    EXPECT_EQ(r.status, ncclInvalidUsage) << r.message;
    EXPECT_NE(r.message.find("windows loaded: none"), std::string::npos) << r.message;
  }
  const std::string text = log.text();
  EXPECT_NE(text.find("rejected " + broken + ": " + broken + ":1: XML parse error"),
            std::string::npos)
      << text;
  // Well-formed, but computes nothing: the verifier's postcondition refuses it.
  EXPECT_NE(text.find("rejected " + idle +
                      ": at count 1: plan verifier: "
                      "postcondition of allreduce"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("notes.txt"), std::string::npos);
  EXPECT_NE(text.find("cannot open directory /nonexistent/weft-plans"), std::string::npos);
  EXPECT_EQ(occurrences(text, "uses msccl:"), 0u);
}

}  // namespace
