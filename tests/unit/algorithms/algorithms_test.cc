// Every built-in algorithm, for every collective it registers, over a grid of rank counts,
// counts, roots and channel counts, must pass the symbolic verifier (postcondition, matching,
// bounded-FIFO deadlock freedom, races, in-place aliasing).
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "algorithms/common/builder.h"
#include "algorithms/registry.h"
#include "algorithms/tree/tree.h"
#include "src/common/error.h"
#include "src/plan/verifier.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Spec;

struct Case {
  std::string algorithm;
  Collective coll;
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const Algorithm& a : all())
    for (Collective c : a.colls) cases.push_back({a.name, c});
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.algorithm << " " << plan::collectiveName(c.coll);
}

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

std::vector<int> roots(Collective c, int n) {
  if (!rooted(c)) return {0};
  std::set<int> r = {0, n - 1, n / 2};
  return {r.begin(), r.end()};
}

Spec makeSpec(Collective c, int n, int root, uint64_t count, uint32_t elemSize = 4) {
  Spec s;
  s.coll = c;
  s.nranks = n;
  s.root = root;
  s.count = count;
  s.elemSize = elemSize;
  return s;
}

std::string describe(const Case& k, const Spec& s, const Options& o) {
  return k.algorithm + " " + plan::collectiveName(k.coll) + " nranks=" + std::to_string(s.nranks) +
         " root=" + std::to_string(s.root) + " count=" + std::to_string(s.count) +
         " elemSize=" + std::to_string(s.elemSize) + " channels=" + std::to_string(o.channels) +
         " slice=" + std::to_string(o.sliceElems);
}

class AlgorithmGrid : public testing::TestWithParam<Case> {
 protected:
  // Builds and verifies; returns false (after reporting) on a failure.
  bool check(const Spec& spec, const Options& o, const plan::VerifyOptions& v) {
    const Case& k = GetParam();
    Plan p;
    try {
      p = build(k.algorithm, spec, o);
    } catch (const Error& e) {
      ADD_FAILURE() << describe(k, spec, o) << ": build threw: " << e.what();
      return false;
    }
    std::string m = plan::verifyMessage(p, v);
    if (m.empty()) return true;
    ADD_FAILURE() << describe(k, spec, o) << ": " << m
                  << (spec.count * spec.nranks < 200 ? "\n" + plan::toText(p) : "");
    return false;
  }
};

// Small slices so that counts above one slice are cheap to verify; the verifier models FIFO slots
// of the same size (ring messages never exceed one slot).
TEST_P(AlgorithmGrid, VerifierAcceptsGrid) {
  constexpr uint64_t kSlice = 256;
  const Case& k = GetParam();
  int failures = 0;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13, 16}) {
    for (uint64_t count : {0, 1, 2, 3, 7, 31, 100, 1000, 1031}) {
      // 1031 is a prime above the slice; the largest shapes at 16 ranks add little but time.
      if (n == 16 && count == 1000) continue;
      for (int channels : {1, 2}) {
        for (int root : roots(k.coll, n)) {
          if (!check(makeSpec(k.coll, n, root, count), {channels, kSlice}, {kSlice, 2}) &&
              ++failures >= 5)
            return;
        }
      }
    }
  }
}

// Default options (128 KiB slices) against the default FIFO model, above one slice.
TEST_P(AlgorithmGrid, VerifierAcceptsDefaults) {
  const Case& k = GetParam();
  for (int n : {2, 3})
    for (int root : roots(k.coll, n)) check(makeSpec(k.coll, n, root, 33001), {}, {});
}

// Other element sizes move the 64-byte chunk alignment.
TEST_P(AlgorithmGrid, VerifierAcceptsElementSizes) {
  const Case& k = GetParam();
  for (uint32_t es : {1, 2, 8})
    for (int n : {3, 4})
      for (uint64_t count : {5, 130, 999})
        check(makeSpec(k.coll, n, n - 1, count, es), {2, 64}, {64, 2});
}

// FIFOs of single-element slots. Chains, trees, halving-doubling and direct exchanges never need
// FIFO space to progress, so even one slot per FIFO does; a ring, where every rank sends before it
// forwards, needs its messages to fit one slot and a second slot to forward through.
TEST_P(AlgorithmGrid, TinyFifos) {
  const Case& k = GetParam();
  const bool ringCycle = k.algorithm == "ring" && !rooted(k.coll);
  const Options o{1, ringCycle ? 1u : 8u};
  const plan::VerifyOptions v{1, ringCycle ? 2 : 1};
  for (int n : {2, 3, 5, 8})
    for (int root : roots(k.coll, n))
      for (int channels : {1, 2}) check(makeSpec(k.coll, n, root, 45), {channels, o.sliceElems}, v);
}

TEST_P(AlgorithmGrid, Deterministic) {
  const Case& k = GetParam();
  Spec s = makeSpec(k.coll, 5, 2, 777);
  EXPECT_EQ(plan::toText(build(k.algorithm, s, {2, 64})),
            plan::toText(build(k.algorithm, s, {2, 64})));
  Plan p = build(k.algorithm, s, {});
  EXPECT_EQ(p.algorithm, k.algorithm);
  EXPECT_EQ(p.programs.size(), 5u);
  EXPECT_EQ(p.inPlaceSafe, k.coll != Collective::kAlltoAll);
}

// The verifier is not vacuous on real plans: breaking any single message, offset or channel of
// a correct plan gets it rejected.
TEST_P(AlgorithmGrid, VerifierRejectsMutants) {
  const Case& k = GetParam();
  for (int n : {3, 4, 5}) {
    const Spec spec = makeSpec(k.coll, n, n - 1, 50);
    const Options o{2, 16};
    const plan::VerifyOptions v{16, 2};
    const Plan good = build(k.algorithm, spec, o);
    ASSERT_EQ(plan::verifyMessage(good, v), "");
    int tried = 0;
    for (int r = 0; r < n; ++r) {
      for (size_t l = 0; l < good.programs[r].lanes.size(); ++l) {
        const auto& steps = good.programs[r].lanes[l].steps;
        bool talks = false;
        for (size_t s = 0; s < steps.size(); ++s) {
          const plan::Step& st = steps[s];
          const bool fifo = plan::opSends(st.op) || plan::opRecvs(st.op);
          talks |= fifo;
          if (fifo) {  // drop a message end (and deps on later steps of the lane stay valid)
            Plan bad = good;
            auto& bs = bad.programs[r].lanes[l].steps;
            bs.erase(bs.begin() + s);
            bool dangling = false;
            for (const auto& lane : bad.programs[r].lanes)
              for (const auto& x : lane.steps)
                for (const auto& d : x.deps) dangling |= d.lane == int(l) && d.step >= int(s);
            if (!dangling) {
              EXPECT_NE(plan::verifyMessage(bad, v), "")
                  << describe(k, spec, o) << " dropping rank " << r << " lane " << l << " step "
                  << s;
              ++tried;
            }
          }
          if (plan::opWritesDst(st.op) && st.count > 0) {  // write one element further on
            Plan bad = good;
            bad.programs[r].lanes[l].steps[s].dst.offset += 1;
            EXPECT_NE(plan::verifyMessage(bad, v), "")
                << describe(k, spec, o) << " shifting dst of rank " << r << " lane " << l
                << " step " << s;
            ++tried;
          }
        }
        if (talks) {
          Plan bad = good;
          bad.programs[r].lanes[l].channel += 7;
          EXPECT_NE(plan::verifyMessage(bad, v), "")
              << describe(k, spec, o) << " moving rank " << r << " lane " << l << " to channel "
              << bad.programs[r].lanes[l].channel;
          ++tried;
        }
      }
    }
    EXPECT_GT(tried, n);
  }
}

INSTANTIATE_TEST_SUITE_P(All, AlgorithmGrid, testing::ValuesIn(allCases()),
                         [](const testing::TestParamInfo<Case>& info) {
                           return info.param.algorithm + "_" +
                                  plan::collectiveName(info.param.coll);
                         });

// Two ranks' rsag allreduce reduces each slice and forwards it at once, on the channel the
// peer's allgather half receives on (the executor can then store it straight into the peer's
// output); the send channel is part of the plan the verifier checks.
TEST(Rsag, TwoRanksForwardEachReducedSliceOnTheGatherChannel) {
  const Options o{2, 16};
  const plan::VerifyOptions v{16, 2};
  const Plan p = build("rsag", makeSpec(Collective::kAllReduce, 2, 0, 1000), o);
  ASSERT_EQ(plan::verifyMessage(p, v), "");
  for (const plan::Program& prog : p.programs) {
    int forwarding = 0;
    for (const plan::Lane& lane : prog.lanes) {
      if (lane.sendChannel < 0) continue;
      ++forwarding;
      EXPECT_EQ(lane.sendChannel, lane.channel + 1);
      for (const plan::Step& st : lane.steps) EXPECT_EQ(st.op, plan::Op::kRecvReduceCopySend);
    }
    EXPECT_EQ(forwarding, o.channels);
    EXPECT_EQ(prog.lanes.size(), 3u * o.channels) << "no separate allgather send lane";
  }
  EXPECT_NE(plan::toText(p).find("sendChannel=1"), std::string::npos);
  // Forwarding on the reduce-scatter channel instead mixes the two halves' messages.
  Plan bad = p;
  for (plan::Lane& lane : bad.programs[1].lanes) lane.sendChannel = -1;
  EXPECT_NE(plan::verifyMessage(bad, v), "");
  // More ranks keep the separate allgather sends.
  const Plan four = build("rsag", makeSpec(Collective::kAllReduce, 4, 0, 1000), o);
  for (const plan::Lane& lane : four.programs[0].lanes) EXPECT_EQ(lane.sendChannel, -1);
}

TEST(Ring, NeedsChunksThatFitTheFifo) {
  // 64-element ring messages through FIFOs of two 16-element slots: every rank's first message
  // fills its FIFO and nobody can forward.
  Plan p = build("ring", makeSpec(Collective::kAllReduce, 4, 0, 1000), {1, 64});
  EXPECT_NE(plan::verifyMessage(p, {16, 2}).find("deadlock"), std::string::npos);
  EXPECT_EQ(plan::verifyMessage(p, {64, 2}), "");
}

TEST(Ring, ChunksAreCappedAtOneSlot) {
  // Asking for huge slices must not produce ring messages above the default slot.
  Plan p = build("ring", makeSpec(Collective::kAllReduce, 3, 0, 200000), {1, 1 << 20});
  for (const auto& prog : p.programs)
    for (const auto& lane : prog.lanes)
      for (const auto& st : lane.steps) EXPECT_LE(st.count, plan::kFifoSlotBytes / 4);
  EXPECT_EQ(plan::verifyMessage(p), "");
}

TEST(Registry, FindAndSupports) {
  ASSERT_NE(find("ring"), nullptr);
  ASSERT_NE(find("tree"), nullptr);
  ASSERT_NE(find("rhd"), nullptr);
  ASSERT_NE(find("direct"), nullptr);
  EXPECT_EQ(find("nccl"), nullptr);
  EXPECT_TRUE(supports("ring", Collective::kAllReduce));
  EXPECT_TRUE(supports("tree", Collective::kBroadcast));
  EXPECT_TRUE(supports("rhd", Collective::kReduceScatter));
  EXPECT_TRUE(supports("direct", Collective::kAlltoAll));
  EXPECT_TRUE(supports("direct", Collective::kReduceScatter));
  EXPECT_TRUE(supports("direct", Collective::kBroadcast));
  EXPECT_TRUE(supports("direct", Collective::kReduce));
  EXPECT_FALSE(supports("tree", Collective::kAlltoAll));
  EXPECT_FALSE(supports("nope", Collective::kAllReduce));
}

TEST(Registry, BuildRejectsBadRequests) {
  auto code = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return Status::kSuccess;
  };
  Spec s = makeSpec(Collective::kAllReduce, 4, 0, 10);
  EXPECT_EQ(code([&] { build("nope", s); }), Status::kInvalidArgument);
  EXPECT_EQ(code([&] { build("tree", makeSpec(Collective::kAlltoAll, 4, 0, 10)); }),
            Status::kInvalidArgument);
  EXPECT_EQ(code([&] { build("ring", makeSpec(Collective::kBroadcast, 4, 4, 10)); }),
            Status::kInvalidArgument);
  EXPECT_EQ(code([&] { build("ring", makeSpec(Collective::kAllReduce, 0, 0, 10)); }),
            Status::kInvalidArgument);
  EXPECT_EQ(code([&] { build("ring", s, {0, 0}); }), Status::kInvalidArgument);
  EXPECT_EQ(code([&] { build("ring", s, {2, 0}); }), Status::kSuccess);
}

TEST(Chunking, SplitEvenAligns) {
  EXPECT_EQ(splitEven(100, 4, 16), (std::vector<uint64_t>{0, 32, 64, 80, 100}));
  EXPECT_EQ(splitEven(10, 4, 16), (std::vector<uint64_t>{0, 3, 6, 8, 10}));
  EXPECT_EQ(splitEven(0, 3, 16), (std::vector<uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(splitEven(2, 3, 1), (std::vector<uint64_t>{0, 1, 2, 2}));
  for (uint64_t count : {112, 1000, 4097, 123457}) {  // at least parts * align
    auto off = splitEven(count, 7, 16);
    EXPECT_EQ(off.back(), count);
    for (size_t i = 1; i + 1 < off.size(); ++i) EXPECT_EQ(off[i] % 16, 0u) << count;
  }
  Spec s = makeSpec(Collective::kAllReduce, 2, 0, 1, 4);
  EXPECT_EQ(alignElems(s), 16u);
  EXPECT_EQ(sliceElems(s, {}), plan::kFifoSlotBytes / 4);
  EXPECT_EQ(sliceElems(s, {1, 100}), 96u);
  EXPECT_EQ(sliceElems(s, {1, 5}), 5u);
}

TEST(Tree, DoubleBinaryTreeShape) {
  for (int n = 1; n <= 40; ++n) {
    auto trees = doubleBinaryTree(n);
    std::vector<int> interior(n, 0);
    for (const TreeShape& t : trees) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(t.children[r].size(), 2u) << n;
        if (t.parent[r] < 0) ++roots;
        if (!t.children[r].empty()) ++interior[r];
        // Parent links reach the root without cycles.
        int x = r, hops = 0;
        while (t.parent[x] >= 0 && hops <= n) x = t.parent[x], ++hops;
        EXPECT_EQ(x, t.root) << n;
      }
      EXPECT_EQ(roots, 1) << n;
    }
    // Like NCCL's: with an odd count, rank 0 (the first tree's root, with one child) is the one
    // rank that may be interior in both.
    for (int r = n % 2 ? 1 : 0; r < n; ++r) EXPECT_LE(interior[r], 1) << "n=" << n << " rank " << r;
  }
  // NCCL's shape for 8 ranks: 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}; mirrored second tree.
  auto t = doubleBinaryTree(8);
  EXPECT_EQ(t[0].children[0], (std::vector<int>{4}));
  EXPECT_EQ(t[0].children[4], (std::vector<int>{2, 6}));
  EXPECT_EQ(t[0].children[6], (std::vector<int>{5, 7}));
  EXPECT_EQ(t[1].root, 7);
  EXPECT_EQ(t[1].children[7], (std::vector<int>{3}));
}

// The fan root pushes whole slices of the share it is given, to every peer in turn and then to
// its own output, on a push lane; the rest goes on a lane of its own, which receivers read.
TEST(Fan, RootPushesItsShareSliceBySlice) {
  Options o;
  o.sliceElems = 128;
  o.pushShare = 0.5;
  const Plan p = build("fan", makeSpec(Collective::kBroadcast, 4, 1, 1050), o);
  EXPECT_EQ(plan::verifyMessage(p, {128, 2}), "");
  const plan::Program& root = p.programs[1];
  ASSERT_EQ(root.lanes.size(), 2u);
  EXPECT_TRUE(root.lanes[0].push);
  EXPECT_FALSE(root.lanes[1].push);
  EXPECT_NE(root.lanes[0].channel, root.lanes[1].channel);
  // 525 elements rounded down to 4 slices, each sent to ranks 2, 3, 0 and copied.
  ASSERT_EQ(root.lanes[0].steps.size(), 4u * 4);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(root.lanes[0].steps[k].op, plan::Op::kSend);
    EXPECT_EQ(root.lanes[0].steps[k].sendPeer, (1 + 1 + k) % 4);
    EXPECT_EQ(root.lanes[0].steps[k].count, 128u);
  }
  EXPECT_EQ(root.lanes[0].steps[3].op, plan::Op::kCopy);
  EXPECT_EQ(root.lanes[1].steps[0].src.offset, 512u);
  EXPECT_EQ(root.lanes[1].steps[0].count, 538u);
  // Receivers push nothing; below one slice nothing is pushed at all.
  EXPECT_FALSE(p.programs[0].lanes[0].push);
  EXPECT_EQ(p.programs[0].lanes[0].steps.size(), 4u);
  const Plan small = build("fan", makeSpec(Collective::kBroadcast, 4, 0, 150), o);
  ASSERT_EQ(small.programs[0].lanes.size(), 1u);
  EXPECT_FALSE(small.programs[0].lanes[0].push);
  EXPECT_NE(plan::toText(p).find(" push"), std::string::npos);
}

TEST(Verifier, FastOnLargePlans) {
  auto t0 = std::chrono::steady_clock::now();
  for (const char* alg : {"ring", "tree", "rhd"}) {
    Plan p = build(alg, makeSpec(Collective::kAllReduce, 16, 0, 4000), {2, 256});
    EXPECT_EQ(plan::verifyMessage(p, {256, 2}), "") << alg;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 3.0);  // three 16-rank, 4000-element plans, each out of place and in place
  RecordProperty("seconds", std::to_string(s));
}

}  // namespace
}  // namespace weft::algo
