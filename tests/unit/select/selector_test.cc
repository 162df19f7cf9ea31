// The built-in selector's choices on one host, where ranks read each other's memory and a byte
// costs the memory traffic it causes, and across hosts, where the bytes sent decide.
#include "src/select/selector.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace weft::select {
namespace {

using plan::Collective;

std::string pick(const Selector& s, Collective c, int n, uint64_t bytes) {
  plan::Spec spec;
  spec.coll = c;
  spec.nranks = n;
  // Allgather / reduce-scatter counts are per rank, as NCCL's.
  const bool perRank = c == Collective::kAllGather || c == Collective::kReduceScatter;
  spec.count = bytes / 4 / (perRank ? n : 1);
  return s.choose(spec).algorithm;
}

TEST(Selector, OneHostLargeReductionsMoveTheLeastMemory) {
  for (int n : {3, 4, 5, 8}) {
    Selector s(n, LinkModel{}, AlgoFilter(""));
    EXPECT_EQ(pick(s, Collective::kAllReduce, n, 16 << 20), n == 3 ? "ring" : "rsag") << n;
    EXPECT_EQ(pick(s, Collective::kReduceScatter, n, 16 << 20), "rsag") << n;
    EXPECT_EQ(pick(s, Collective::kAllReduce, n, 8), "direct") << n;
  }
  // Two ranks: every algorithm moves the same bytes, but rsag's sends and receives do not wait
  // for each other step by step.
  Selector two(2, LinkModel{}, AlgoFilter(""));
  EXPECT_EQ(pick(two, Collective::kAllReduce, 2, 16 << 20), "rsag");
  EXPECT_EQ(pick(two, Collective::kAllReduce, 2, 8), "direct");
}

TEST(Selector, OneHostCopiesRunAtOnce) {
  Selector s(4, LinkModel{}, AlgoFilter(""));
  EXPECT_EQ(pick(s, Collective::kAllGather, 4, 16 << 20), "direct");
  EXPECT_EQ(pick(s, Collective::kBroadcast, 4, 16 << 20), "direct");
  // Small broadcasts go along a chain: each rank wakes one peer per call.
  EXPECT_EQ(pick(s, Collective::kBroadcast, 4, 8), "ring");
  EXPECT_EQ(pick(s, Collective::kBroadcast, 4, 8 << 10), "ring");
  // From a few tens of KiB the receivers' copies at once win over the chain's one by one.
  EXPECT_EQ(pick(s, Collective::kBroadcast, 4, 32 << 10), "direct");
  // Ranks that take turns on the cores: each hop of a chain waits for its turn.
  Selector shared(4, LinkModel{}, AlgoFilter(""));
  shared.setSharedCores(true);
  EXPECT_NE(pick(shared, Collective::kBroadcast, 4, 8), "ring");
  // There the root's copies go out in one straight call: direct, from the smallest size.
  EXPECT_EQ(pick(shared, Collective::kBroadcast, 4, 8), "direct");
  EXPECT_EQ(pick(shared, Collective::kBroadcast, 4, 1024), "direct");
  // Two ranks: the chain is the direct copy.
  Selector two(2, LinkModel{}, AlgoFilter(""));
  EXPECT_EQ(pick(two, Collective::kBroadcast, 2, 16 << 20), "ring");
}

// Ranks dealt round-robin to 2 cores: 4 ranks leave the root's core one receiver and the other
// core two, so a large in-place broadcast's root pushes a third itself.
TEST(Selector, FanWhereTheRootsCoreCarriesFewerReceivers) {
  auto fanPick = [](int n, uint64_t bytes, bool inPlace, int root = 0) {
    Selector s(n, LinkModel{}, AlgoFilter(""));
    s.setSharedCores(true);
    std::vector<int> cores(n);
    for (int r = 0; r < n; ++r) cores[r] = r % 2;
    s.setCores(cores);
    plan::Spec spec;
    spec.coll = Collective::kBroadcast;
    spec.nranks = n;
    spec.root = root;
    spec.count = bytes / 4;
    return s.choose(spec, CallTraits{inPlace, false});
  };
  const Choice c = fanPick(4, 32 << 20, true);
  EXPECT_EQ(c.algorithm, "fan");
  EXPECT_NEAR(c.options.pushShare, 1.0 / 3, 1e-9);
  EXPECT_EQ(fanPick(4, 16 << 20, true, 3).algorithm, "fan");
  // Out of place the root's own copy adds to its share; below 16 MiB the buffers stay cached.
  EXPECT_EQ(fanPick(4, 32 << 20, false).algorithm, "direct");
  EXPECT_EQ(fanPick(4, 8 << 20, true).algorithm, "direct");
  // 3 ranks: a receiver on each core; 8: the root's core three, the other four.
  EXPECT_EQ(fanPick(3, 32 << 20, true).algorithm, "direct");
  EXPECT_EQ(fanPick(8, 32 << 20, true).algorithm, "direct");
  // Unknown placement, or a core per rank: no fan.
  Selector plain(4, LinkModel{}, AlgoFilter(""));
  plain.setCores({0, 1, 0, 1});
  EXPECT_EQ(plain.fanShare(0), 0.0);
  Selector unknown(4, LinkModel{}, AlgoFilter(""));
  unknown.setSharedCores(true);
  EXPECT_EQ(unknown.fanShare(0), 0.0);
  // Forced, it builds anywhere.
  Selector forced(3, LinkModel{}, AlgoFilter("broadcast:fan"));
  plan::Spec spec;
  spec.coll = Collective::kBroadcast;
  spec.nranks = 3;
  spec.count = 1024;
  EXPECT_EQ(forced.choose(spec).algorithm, "fan");
}

TEST(Selector, AcrossHostsRsagPaysForTheSharedNetworkLink) {
  Selector s(8, LinkModel{}, AlgoFilter(""));
  LinkModel net;
  net.alphaUs = 20;
  net.betaUsPerByte = 1.0 / 1250.0;  // 10 Gbit/s
  s.setHosts({0, 0, 0, 0, 1, 1, 1, 1}, net);
  EXPECT_NE(pick(s, Collective::kAllReduce, 8, 64 << 20), "rsag");
  EXPECT_NE(pick(s, Collective::kReduceScatter, 8, 64 << 20), "rsag");
}

TEST(Selector, AlgoFilterForcesRsag) {
  Selector s(4, LinkModel{}, AlgoFilter("rsag"));
  EXPECT_EQ(pick(s, Collective::kAllReduce, 4, 8), "rsag");
}

// NCCL_DEBUG_SUBSYS=TUNING's table: per collective and size, each candidate's modelled time, the
// corrected one where rows of the correction table apply, and the pick.
TEST(Selector, ScoreTableShowsModelCorrectionsAndPick) {
  Selector s(4, LinkModel{}, AlgoFilter(""));
  const std::string table = s.table();
  std::istringstream lines(table);
  std::string line, coll;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (!first.empty() && !std::isdigit(static_cast<unsigned char>(first[0]))) coll = first;
    if (first == "allreduce") {
      EXPECT_NE(line.find("rsag"), std::string::npos) << line;
      EXPECT_NE(line.find("pick"), std::string::npos) << line;
    }
    if (coll != "allreduce" || first.empty() || !std::isdigit(first[0])) continue;
    ++rows;
    const uint64_t bytes = std::stoull(first);
    std::vector<std::string> cells;
    for (std::string w; words >> w;) cells.push_back(w);
    // ring, tree, rhd, direct, rsag, hier (no second host: "-"), then the pick.
    ASSERT_EQ(cells.size(), 7u) << line;
    EXPECT_EQ(cells.back(), pick(s, Collective::kAllReduce, 4, bytes)) << line;
    EXPECT_EQ(cells[5], "-") << line;
    // On one host the ring's bandwidth term is corrected: model>corrected.
    EXPECT_NE(cells[0].find('>'), std::string::npos) << line;
    if (bytes >= (1u << 20)) {
      const double model = std::stod(cells[0]);
      const double corrected = std::stod(cells[0].substr(cells[0].find('>') + 1));
      EXPECT_GT(corrected, model) << line;
    }
  }
  EXPECT_EQ(rows, 10);
}

TEST(Selector, ScoresComeFromSynthModelsClosedForm) {
  Selector s(4, LinkModel{}, AlgoFilter(""));
  plan::Spec spec;
  spec.coll = Collective::kAllGather;
  spec.nranks = 4;
  spec.count = 1 << 20;
  spec.elemSize = 4;
  synth::AlphaBetaView view;
  view.nranks = 4;
  view.local = {LinkModel{}.alphaUs, LinkModel{}.betaUsPerByte};
  // The ring's allgather has no correction: the selector's time is the model's.
  const Score ring = s.score(Algorithm::kRing, spec);
  EXPECT_EQ(ring.corrections, 0);
  EXPECT_EQ(ring.us, synth::closedForm(synth::Shape::kRing, spec.coll, view, 4 << 20).timeUs(view));
  // Unsupported: infinite, whatever the rows say.
  spec.coll = Collective::kAlltoAll;
  EXPECT_TRUE(std::isinf(s.score(Algorithm::kRing, spec).us));
}

}  // namespace
}  // namespace weft::select
