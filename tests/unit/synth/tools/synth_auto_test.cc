// synth/auto: plan selection against the built-in ring and the on-disk selection cache.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"
#include "src/topo/xml_reader.h"
#include "synth/auto/plan_cache.h"
#include "synth/auto/synthesize.h"
#include "synth/model/simulator.h"

namespace weft::synth {
namespace {

Fabric dgx1(std::vector<int> gpus = {}) {
  FabricOptions o;
  o.gpus = std::move(gpus);
  return fabricFromTopology(topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) +
                                                   "/tests/golden/topologies/dgx1-v100.xml"),
                            o);
}

SelectionOptions fewSizes() {
  SelectionOptions o;
  o.sizes = {256u << 10, 4u << 20, 64u << 20};
  return o;
}

TEST(SelectPlans, WindowsWhereThePlansBeatTheBuiltInRing) {
  const Fabric f = dgx1();
  const SelectionOptions o = fewSizes();
  const std::vector<SelectedPlan> plans = selectPlans(f, o);
  ASSERT_FALSE(plans.empty());
  for (plan::Collective coll : o.colls) {
    uint64_t next = 0;  // windows of one collective follow each other without overlap
    bool covered = false;
    for (const SelectedPlan& p : plans) {
      if (p.plan.coll != coll) continue;
      SCOPED_TRACE(p.plan.name);
      EXPECT_GE(p.plan.minBytes, next);
      next = p.plan.maxBytes == 0 ? UINT64_MAX : p.plan.maxBytes + 1;
      covered |= p.plan.maxBytes == 0;
      EXPECT_LT(p.predictedUs, p.ringUs * (1 - o.minGain));
      // Re-simulated at the window's first sampled size: the same figures.
      uint64_t at = 0;
      for (uint64_t s : o.sizes)
        if (s >= p.plan.minBytes && (p.plan.maxBytes == 0 || s <= p.plan.maxBytes) && !at) at = s;
      ASSERT_NE(at, 0u);
      EXPECT_DOUBLE_EQ(simulate(p.plan, at, f).timeUs, p.predictedUs);
      EXPECT_DOUBLE_EQ(simulate(builtinPlan("ring", coll, 8, at), f).timeUs, p.ringUs);
      uint64_t count = 1;
      while (plan::chunkElems(p.plan, count) == 0) ++count;
      EXPECT_NO_THROW(plan::verify(plan::instantiate(p.plan, count)));
    }
    // The rank-order ring crosses single NVLinks twice on DGX-1: large sizes always go elsewhere.
    EXPECT_TRUE(covered) << plan::collectiveName(coll);
  }
}

TEST(SelectPlans, OnlyClearWinsCount) {
  // Host ranks on one CPU, each behind its own 10 GB/s link: the built-in ring is at the
  // bandwidth bound but for its per-slice hop latency, so candidates win by a few percent at
  // most; none is twice as fast.
  FabricOptions hostRanks;
  hostRanks.hostRanksPerHost = 4;
  const Fabric f =
      fabricFromTopology(topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) +
                                                "/tests/golden/topologies/build-vm.xml"),
                         hostRanks);
  ASSERT_EQ(f.nranks, 4);
  SelectionOptions o = fewSizes();
  o.minGain = 0.5;
  EXPECT_TRUE(selectPlans(f, o).empty());
  o.minGain = 0.01;
  for (const SelectedPlan& p : selectPlans(f, o)) EXPECT_GT(p.ringUs / p.predictedUs, 1.01);
}

TEST(SelectPlans, UnknownMethodsAndCollectivesAreSkippedWithANote) {
  SelectionOptions o = fewSizes();
  o.colls = {plan::Collective::kAllGather};
  o.methods = {Method::kTree, Method::kPack};  // tree has no allgather: not tried
  std::vector<std::string> notes;
  const auto plans = selectPlans(dgx1({0, 1, 2}), o, &notes);
  for (const auto& p : plans) EXPECT_EQ(p.method, "pack");
  EXPECT_THROW(synthesize(Method::kTree, plan::Collective::kAllGather, dgx1()), Error);
}

class PlanCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-synth-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + root).c_str()); }
  std::string root;
};

TEST_F(PlanCache, StoresReadsBackAndRebuildsBrokenEntries) {
  const Fabric f = dgx1({0, 1, 2, 4, 5});
  const SelectionOptions o = fewSizes();
  const CachedSelection first = cachedSelectPlans(f, o, root);
  EXPECT_FALSE(first.fromCache);
  ASSERT_FALSE(first.plans.empty());
  EXPECT_EQ(first.dir, root + "/" + selectionKey(f, o));
  const CachedSelection second = cachedSelectPlans(f, o, root);
  ASSERT_TRUE(second.fromCache);
  ASSERT_EQ(second.plans.size(), first.plans.size());
  for (size_t i = 0; i < first.plans.size(); ++i) {
    // Read back in the importer's normal form: the same MSCCL XML.
    EXPECT_EQ(plan::exportMsccl(first.plans[i].plan), plan::exportMsccl(second.plans[i].plan));
    EXPECT_EQ(first.plans[i].method, second.plans[i].method);
    EXPECT_DOUBLE_EQ(first.plans[i].predictedUs, second.plans[i].predictedUs);
  }
  // Damage: a truncated index, a missing plan, a malformed plan. Each is ignored and rebuilt.
  const std::string index = first.dir + "/index";
  std::string text;
  {
    std::ifstream in(index);
    std::stringstream s;
    s << in.rdbuf();
    text = s.str();
  }
  // The index: a format line, then "method predictedUs ringUs file" per plan, then "end".
  std::istringstream lines(text);
  std::string line, method, predicted, ring, file;
  std::getline(lines, line);
  std::getline(lines, line);
  std::istringstream(line) >> method >> predicted >> ring >> file;
  const std::string planFile = first.dir + "/" + file;
  const std::vector<std::pair<std::string, std::string>> damage = {
      {index, text.substr(0, text.size() - 4)},  // "end\n" cut off
      {planFile, ""},                            // removed below
      {planFile, "<algo name=\"x\""},
      {index, "weft-synth-selection 0\nend\n"},
  };
  for (size_t d = 0; d < damage.size(); ++d) {
    SCOPED_TRACE(d);
    ASSERT_FALSE(cachedSelectPlans(f, o, root, /*rebuild=*/true).fromCache);  // a good entry
    if (d == 1)
      std::remove(planFile.c_str());
    else
      std::ofstream(damage[d].first, std::ios::trunc) << damage[d].second;
    const CachedSelection again = cachedSelectPlans(f, o, root);
    EXPECT_FALSE(again.fromCache);
    ASSERT_FALSE(again.notes.empty());
    EXPECT_NE(again.notes[0].find("ignored"), std::string::npos) << again.notes[0];
    EXPECT_EQ(again.plans.size(), first.plans.size());
    EXPECT_TRUE(cachedSelectPlans(f, o, root).fromCache);  // rewritten
  }
}

TEST_F(PlanCache, KeysTellFabricsAndOptionsApart) {
  const SelectionOptions o = fewSizes();
  SelectionOptions other = o;
  other.sizes.push_back(1u << 30);
  EXPECT_NE(selectionKey(dgx1(), o), selectionKey(dgx1({0, 1, 2}), o));
  EXPECT_NE(selectionKey(dgx1(), o), selectionKey(dgx1(), other));
  EXPECT_EQ(selectionKey(dgx1(), o), selectionKey(dgx1(), o));
  // No root: nothing on disk.
  const CachedSelection none = cachedSelectPlans(dgx1({0, 1, 2}), o, "");
  EXPECT_FALSE(none.fromCache);
  EXPECT_TRUE(none.dir.empty());
}

}  // namespace
}  // namespace weft::synth
