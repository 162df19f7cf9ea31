// weft-synth, run as a program on the reference topologies: the MSCCL XML it writes imports and
// verifies, the table it prints reaches the bound where the packing does, bad arguments exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/plan/chunk_plan.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"

namespace weft::synth {
namespace {

struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun run(const std::string& args) {
  ToolRun r;
  const std::string cmd = std::string(WEFT_SYNTH_TOOL) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string topo(const std::string& name) {
  return std::string(WEFT_SOURCE_DIR) + "/tests/golden/topologies/" + name;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The table row of `bytes`: its numeric columns (size, synth, algbw, busbw, bound, ratio, ring,
// x ring[, tree]); empty when the row is missing.
std::vector<double> row(const std::string& out, uint64_t bytes) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::vector<double> v;
    std::string c;
    while (cols >> c) v.push_back(c == "-" ? -1 : std::stod(c));
    if (!v.empty() && static_cast<uint64_t>(v[0]) == bytes) return v;
  }
  return {};
}

class SynthTool : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-synth-tool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir).c_str()); }

  // The plan the tool wrote under `prefix`, imported and verified at two counts.
  plan::ChunkPlan importAndVerify(const std::string& prefix) {
    const plan::ChunkPlan cp = plan::importMsccl(readFile(prefix + ".xml"), prefix + ".xml");
    for (uint64_t want : {uint64_t{1}, uint64_t{1000}}) {
      uint64_t count = want;
      while (plan::chunkElems(cp, count) == 0) ++count;
      EXPECT_NO_THROW(plan::verify(plan::instantiate(cp, count))) << prefix << " count " << count;
    }
    EXPECT_NE(readFile(prefix + ".txt").find("lane 0"), std::string::npos);
    return cp;
  }
  std::string dir;
};

TEST_F(SynthTool, PackedAllGatherOnDgx1ReachesTheBound) {
  const ToolRun r = run("--topo " + topo("dgx1-v100.xml") +
                        " --coll allgather --method pack --sizes 1M:1G:32 --out " + dir +
                        "/ag --dot " + dir + "/ag.dot");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::vector<double> big = row(r.out, 1ull << 30);
  ASSERT_GE(big.size(), 8u) << r.out;
  EXPECT_GE(big[5], 0.99) << r.out;   // bound / synthesized time
  EXPECT_LE(big[5], 1.0) << r.out;    // never below the bound
  EXPECT_GE(big[7], 0.999) << r.out;  // not slower than the searched rings
  const plan::ChunkPlan cp = importAndVerify(dir + "/ag");
  EXPECT_EQ(cp.coll, plan::Collective::kAllGather);
  EXPECT_EQ(cp.nranks, 8);
  const std::string dot = readFile(dir + "/ag.dot");
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("r0 -> r1"), std::string::npos) << dot;  // gpu0-gpu1 is an NVLink pair
  EXPECT_EQ(dot.find("r0 -> r5"), std::string::npos) << dot;  // no NVLink between 0 and 5
}

TEST_F(SynthTool, FragmentedDgx1PlansImportVerifyAndBeatTheRing) {
  for (const char* coll : {"reducescatter", "allreduce"}) {
    SCOPED_TRACE(coll);
    const std::string prefix = dir + "/" + coll;
    const ToolRun r = run("--topo " + topo("dgx1-v100.xml") + " --gpus 0,1,2,4,5 --coll " + coll +
                          " --sizes 64M:1G:16 --out " + prefix);
    ASSERT_EQ(r.status, 0) << r.out;
    for (uint64_t bytes : {64ull << 20, 1ull << 30}) {
      const std::vector<double> v = row(r.out, bytes);
      ASSERT_GE(v.size(), 8u) << r.out;
      EXPECT_GE(v[7], 0.999) << "slower than the ring at " << bytes << "\n" << r.out;
    }
    const plan::ChunkPlan cp = importAndVerify(prefix);
    EXPECT_EQ(cp.nranks, 5);
  }
}

TEST_F(SynthTool, HostRanksOfABuildMachine) {
  const ToolRun r =
      run("--topo " + topo("build-vm.xml") +
          " --ranks 4 --coll allreduce --method ring --sizes 1K:1M:32 --out " + dir + "/vm");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(": 4 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(row(r.out, 1024).size(), 9u) << r.out;  // allreduce has a built-in tree column
  EXPECT_EQ(importAndVerify(dir + "/vm").nranks, 4);
}

TEST_F(SynthTool, ExactMethodWhereZ3IsBuilt) {
  const ToolRun r =
      run("--topo " + topo("dgx1-v100.xml") +
          " --coll allgather --method exact --sizes 1G --timeout 30 --out " + dir + "/exact");
#ifdef WEFT_SYNTH_HAVE_Z3
  ASSERT_EQ(r.status, 0) << r.out;
  // SCCL's bandwidth-optimal (3, 7, 6) schedule: at the cut bound.
  const std::vector<double> big = row(r.out, 1ull << 30);
  ASSERT_GE(big.size(), 8u) << r.out;
  EXPECT_GE(big[5], 0.99) << r.out;
  EXPECT_EQ(importAndVerify(dir + "/exact").nranks, 8);
#else
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("Z3 was not found"), std::string::npos) << r.out;
#endif
}

// --choose races the methods at its size, not at the largest row.
TEST_F(SynthTool, ChooseSetsTheSizeTheMethodsRaceAt) {
  const ToolRun r = run("--topo " + topo("dgx1-v100.xml") + " --coll allgather --sizes 64M:256M" +
                        " --choose 1M");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("us at 1M"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("us at 256M"), std::string::npos) << r.out;
  EXPECT_GE(row(r.out, 256ull << 20).size(), 6u) << r.out;
}

TEST_F(SynthTool, BadArgumentsExitTwoWithAMessage) {
  const std::string dgx1 = topo("dgx1-v100.xml");
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"--topo /nonexistent/topo.xml --coll allgather", "/nonexistent/topo.xml"},
      {"--topo " + dgx1 + " --coll allgatherv", "unknown collective 'allgatherv'"},
      {"--topo " + dgx1 + " --coll allgather --gpus 0,x", "'x' is not a GPU index"},
      {"--topo " + dgx1 + " --coll allgather --gpus 0,1,9", "9"},
      {"--topo " + dgx1 + " --coll allgather --method magic", "unknown method 'magic'"},
      {"--topo " + dgx1 + " --coll allgather --method tree", "allreduce only"},
      {"--topo " + dgx1 + " --coll allgather --sizes 1G:1K", "below the smallest"},
      {"--topo " + dgx1 + " --coll broadcast --root 8", "--root 8"},
      {"--coll allgather", "--topo FILE is required"},
      {"--topo " + dgx1 + " --coll allgather --ranks 4", "--ranks is for machines without GPUs"},
      {"--topo " + topo("build-vm.xml") + " --coll allgather --gpus 0,1", "has no GPUs"},
      {"--topo " + dgx1 + " --coll allgather --frobnicate", "unknown argument '--frobnicate'"},
      {"--topo " + dgx1 + " --coll allgather --choose 3X", "unknown suffix"},
  };
  for (const Case& c : cases) {
    const ToolRun r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("weft-synth: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace weft::synth
