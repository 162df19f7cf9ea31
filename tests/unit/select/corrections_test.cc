// synth/model's closed forms as the selector reads them, and the correction table's rows: each
// names a benchmark-log entry of perf/README.md and an algorithm that builds its collective.
#include "src/select/corrections.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/common/env.h"
#include "src/select/selector.h"
#include "synth/model/alpha_beta.h"
#include "synth/model/fabric.h"

namespace weft::select {
namespace {

using plan::Collective;

TEST(AlphaBeta, ViewOfAFabricTakesItsRoutes) {
  const synth::Fabric f = synth::fullyConnectedFabric(4, 8.0, 1.5);
  const synth::AlphaBetaView v = synth::alphaBetaOf(f);
  EXPECT_EQ(v.nranks, 4);
  EXPECT_TRUE(v.oneHost());
  EXPECT_DOUBLE_EQ(v.local.alphaUs, 1.5);
  EXPECT_DOUBLE_EQ(v.local.betaUsPerByte, 1.0 / 8000.0);
}

TEST(AlphaBeta, ClosedFormsOfTheTextbookShapes) {
  synth::AlphaBetaView v;
  v.nranks = 4;
  v.local = {1.0, 1e-3};
  const double bytes = 1 << 20;
  // Ring allreduce: 2(n-1) steps, 2(n-1)/n of the buffer through each link.
  const synth::ClosedForm ring =
      synth::closedForm(synth::Shape::kRing, Collective::kAllReduce, v, bytes);
  EXPECT_DOUBLE_EQ(ring.timeUs(v), 6 * 1.0 + 1.5 * bytes * 1e-3);
  // rsag on one host: the ring's bytes scaled by its memory traffic against the ring's.
  const synth::ClosedForm rsag =
      synth::closedForm(synth::Shape::kReduceScatterAllGather, Collective::kAllReduce, v, bytes);
  EXPECT_DOUBLE_EQ(rsag.flat.scale, 11.0 / 15.0);
  EXPECT_LT(rsag.timeUs(v), ring.timeUs(v));
  // Not every shape builds every collective; hierarchical plans need several hosts.
  EXPECT_FALSE(synth::closedForm(synth::Shape::kTree, Collective::kAllGather, v, bytes).supported);
  EXPECT_FALSE(
      synth::closedForm(synth::Shape::kHierarchical, Collective::kAllReduce, v, bytes).supported);
  EXPECT_TRUE(std::isinf(
      synth::closedForm(synth::Shape::kHierarchical, Collective::kAllReduce, v, bytes).timeUs(v)));
  // Across hosts: flat shapes take the network's hop; rsag's share is what leaves a host.
  v.hosts = 2;
  v.maxLocal = 2;
  v.net = {30.0, 1e-2};
  const synth::ClosedForm across =
      synth::closedForm(synth::Shape::kReduceScatterAllGather, Collective::kAllReduce, v, bytes);
  EXPECT_DOUBLE_EQ(across.flat.scale, 2.0 * 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(
      synth::closedForm(synth::Shape::kRing, Collective::kAllReduce, v, bytes).timeUs(v),
      6 * 30.0 + 1.5 * bytes * 1e-2);
  const synth::ClosedForm hier =
      synth::closedForm(synth::Shape::kHierarchical, Collective::kAllReduce, v, bytes);
  EXPECT_DOUBLE_EQ(hier.timeUs(v), 2 * 30.0 + bytes * 1e-2 + 2 * 1.0 + bytes * 1e-3);
}

TEST(Corrections, EveryRowNamesABenchmarkEntryAndABuildableAlgorithm) {
  std::ifstream readme(WEFT_SOURCE_DIR "/perf/README.md");
  ASSERT_TRUE(readme);
  std::set<std::string> entries;
  for (std::string line; std::getline(readme, line);)
    if (line.rfind("### ", 0) == 0) entries.insert(line.substr(4));
  for (const Correction& row : kCorrections) {
    const char* name = info(row.algorithm).name;
    EXPECT_TRUE(entries.count(row.benchmark)) << "no benchmark-log entry '" << row.benchmark << "'";
    EXPECT_TRUE(algo::supports(name, row.coll))
        << name << " does not build " << plan::collectiveName(row.coll);
    EXPECT_TRUE(row.term == Term::kSteps || (row.perPeer == 0 && row.perRound == 0)) << name;
  }
}

TEST(Corrections, AlgorithmIdsAreTheRegistrysEntries) {
  for (const algo::Algorithm& alg : algo::all()) {
    const std::optional<Algorithm> id = algorithmNamed(alg.name);
    ASSERT_TRUE(id) << alg.name;
    EXPECT_STREQ(info(*id).name, alg.name);
  }
  for (const AlgorithmInfo& a : kAlgorithms) EXPECT_NE(algo::find(a.name), nullptr) << a.name;
  EXPECT_FALSE(algorithmNamed("msccl"));
}

// NCCL_ALGO's help text and the README's list name every algorithm the parser takes.
TEST(AlgoNames, HelpAndReadmeNameEveryAlgorithm) {
  auto lineWith = [](const char* file, const std::string& needle) {
    std::ifstream in(std::string(WEFT_SOURCE_DIR) + "/" + file);
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) return line;
    return std::string();
  };
  std::string help;
  for (const env::Knob& k : env::knobs())
    if (std::string(k.name) == "NCCL_ALGO") help = k.help;
  const std::string readme = lineWith("README.md", "`NCCL_ALGO=");
  ASSERT_FALSE(help.empty());
  ASSERT_FALSE(readme.empty());
  std::vector<std::string> names = {kLibraryAlgorithm, kSynthAlgorithm};
  for (const algo::Algorithm& alg : algo::all()) names.push_back(alg.name);
  for (const std::string& name : names) {
    EXPECT_NE(help.find(" " + name), std::string::npos) << name << " missing from: " << help;
    EXPECT_TRUE(readme.find("=" + name + "|") != std::string::npos ||
                readme.find("|" + name + "|") != std::string::npos ||
                readme.find("|" + name + "`") != std::string::npos)
        << name << " missing from: " << readme;
  }
}

}  // namespace
}  // namespace weft::select
