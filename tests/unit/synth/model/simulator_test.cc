#include "synth/model/simulator.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "synth/model/bounds.h"
#include "synth/model/cost_model.h"
#include "tests/unit/synth/model/model_test_util.h"

namespace weft::synth {
namespace {

using plan::Collective;
using testing::addLane;
using testing::chainFabric;
using testing::goldenFabric;
using testing::p2pPlan;
using testing::recvFrom;
using testing::sendTo;
using testing::starFabric;

constexpr uint64_t kMiB = 1ull << 20;
constexpr double kSlice = 128 * 1024;

double us(double bytes, double gbs) { return bytes / (gbs * kBytesPerUsPerGBs); }

plan::Plan ring(Collective coll, int n, uint64_t bytes, int channels = 1, int root = 0) {
  plan::Spec spec;
  spec.coll = coll;
  spec.nranks = n;
  spec.root = root;
  spec.elemSize = 4;
  spec.count = countForBytes(coll, n, bytes, 4);
  algo::Options o;
  o.channels = channels;
  return algo::build("ring", spec, o);
}

// The error message of simulate(), or "" when it succeeds.
std::string simError(const plan::Plan& p, const Fabric& f, const SimOptions& o = {}) {
  try {
    simulate(p, f, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Simulator, OneSendIsLatencyPlusBytesOverBandwidth) {
  const Fabric f = fullyConnectedFabric(2, 25.0, 1.5);
  plan::Plan p = p2pPlan(2);
  addLane(p, 0, 0, {sendTo(1, kMiB)});
  addLane(p, 1, 0, {recvFrom(0, kMiB)});
  const SimResult r = simulate(p, f);
  EXPECT_NEAR(r.timeUs, 1.5 + us(kMiB, 25.0), 1e-9);
  const int link = f.routes[0][1][0];
  EXPECT_DOUBLE_EQ(r.links[link].bytes, kMiB);
  EXPECT_NEAR(r.links[link].busyUs, us(kMiB, 25.0), 1e-9);
  EXPECT_DOUBLE_EQ(r.links[f.routes[1][0][0]].bytes, 0.0);
  EXPECT_EQ(r.lastStep.rank, 1);
  EXPECT_EQ(r.rankFinishUs.size(), 2u);
  // The last step waited for the send's data.
  ASSERT_EQ(r.criticalPath.size(), 2u);
  EXPECT_EQ(r.criticalPath[0].id.rank, 0);
  EXPECT_EQ(r.criticalPath[1].waitedFor, "data");
}

TEST(Simulator, TwoTransfersOnOneLinkTakeTwiceAsLong) {
  const Fabric f = fullyConnectedFabric(2, 25.0, 1.0);
  plan::Plan p = p2pPlan(2);
  for (int c = 0; c < 2; ++c) {
    addLane(p, 0, c, {sendTo(1, kMiB)});
    addLane(p, 1, c, {recvFrom(0, kMiB)});
  }
  EXPECT_NEAR(simulate(p, f).timeUs, 1.0 + 2 * us(kMiB, 25.0), 1e-9);
}

// Lanes share a link in proportion to plan::Lane::share: with shares 3 and 1, two equal sends
// move at 3/4 and 1/4 of the link until the first is done (4/3 of one send's time), then the
// second takes the whole link; without laneShares both finish at twice one send's time.
TEST(Simulator, LaneSharesWeighTheLinkSharing) {
  const Fabric f = fullyConnectedFabric(2, 25.0, 0.0);
  plan::Plan p = p2pPlan(2);
  for (int c = 0; c < 2; ++c) {
    addLane(p, 0, c, {sendTo(1, kMiB)});
    addLane(p, 1, c, {recvFrom(0, kMiB)});
  }
  p.programs[0].lanes[0].share = 3;
  const SimResult r = simulate(p, f);
  EXPECT_NEAR(r.laneFinishUs[0][0], 4.0 / 3 * us(kMiB, 25.0), 0.02 * us(kMiB, 25.0));
  EXPECT_NEAR(r.timeUs, 2 * us(kMiB, 25.0), 1e-6);
  SimOptions o;
  o.laneShares = false;
  const SimResult even = simulate(p, f, o);
  EXPECT_NEAR(even.laneFinishUs[0][0], 2 * us(kMiB, 25.0), 0.02 * us(kMiB, 25.0));
  EXPECT_NEAR(even.timeUs, 2 * us(kMiB, 25.0), 1e-6);
}

TEST(Simulator, TransfersShareASwitchPortButNotDisjointPaths) {
  const Fabric f = starFabric(4, 20.0, 1.0);
  // 0 -> 2 and 1 -> 2 share the switch's link to 2.
  plan::Plan shared = p2pPlan(4);
  addLane(shared, 0, 0, {sendTo(2, kMiB)});
  addLane(shared, 1, 0, {sendTo(2, kMiB)});
  addLane(shared, 2, 0, {recvFrom(0, kMiB)});
  addLane(shared, 2, 0, {recvFrom(1, kMiB)});
  EXPECT_NEAR(simulate(shared, f).timeUs, 1.0 + 2 * us(kMiB, 20.0), 1e-9);
  // 0 -> 2 and 1 -> 3 cross different links.
  plan::Plan apart = p2pPlan(4);
  addLane(apart, 0, 0, {sendTo(2, kMiB)});
  addLane(apart, 1, 0, {sendTo(3, kMiB)});
  addLane(apart, 2, 0, {recvFrom(0, kMiB)});
  addLane(apart, 3, 0, {recvFrom(1, kMiB)});
  EXPECT_NEAR(simulate(apart, f).timeUs, 1.0 + us(kMiB, 20.0), 1e-9);
}

TEST(Simulator, FewSlotsExposeTheLatency) {
  // One slot: each slice waits for the previous one to arrive and be consumed.
  const Fabric f = fullyConnectedFabric(2, 25.0, 3.0);
  plan::Plan p = p2pPlan(2);
  addLane(p, 0, 0, {sendTo(1, 8 * kSlice)});
  addLane(p, 1, 0, {recvFrom(0, 8 * kSlice)});
  SimOptions o;
  o.fifoSlots = 1;
  EXPECT_NEAR(simulate(p, f, o).timeUs, 8 * (us(kSlice, 25.0) + 3.0), 1e-9);
  o.fifoSlots = 8;
  EXPECT_NEAR(simulate(p, f, o).timeUs, 8 * us(kSlice, 25.0) + 3.0, 1e-9);
}

TEST(Simulator, CoarsenedSlicesCoverEveryByte) {
  const Fabric f = fullyConnectedFabric(2, 1.0, 0.0);  // no latency: slots never run out
  plan::Plan p = p2pPlan(2);
  addLane(p, 0, 0, {sendTo(1, 1025)});
  addLane(p, 1, 0, {recvFrom(0, 1025)});
  SimOptions o;
  o.sliceBytes = 1;
  o.maxSlicesPerStep = 1000;  // 1025 one-byte slices would be too many: 1000 of 1 or 2 bytes
  const SimResult r = simulate(p, f, o);
  EXPECT_NEAR(r.timeUs, us(1025, 1.0), 1e-9);
  EXPECT_EQ(r.events, 1000u + 1000u + 2u);  // slices sent, received, steps
  EXPECT_DOUBLE_EQ(r.links[f.routes[0][1][0]].bytes, 1025.0);
}

TEST(Simulator, StepOverheadAndLocalBandwidth) {
  const Fabric f = fullyConnectedFabric(2, 25.0, 1.0);
  plan::Plan p = p2pPlan(2);
  plan::Step copy;
  copy.op = plan::Op::kCopy;
  copy.count = kMiB;
  addLane(p, 0, 0, {copy, sendTo(1, kMiB)});
  addLane(p, 1, 0, {recvFrom(0, kMiB)});
  SimOptions o;
  EXPECT_NEAR(simulate(p, f, o).timeUs, 1.0 + us(kMiB, 25.0), 1e-9);  // copies are free
  o.localBw = 100.0;
  o.stepOverheadUs = 0.5;
  EXPECT_NEAR(simulate(p, f, o).timeUs, 0.5 + us(kMiB, 100.0) + 0.5 + us(kMiB, 25.0) + 1.0, 1e-9);
}

// With no latency, a pipelined ring runs at its links' bandwidth: (n-1)/n * M / bw for
// allgather, twice that for allreduce.
TEST(Simulator, RingsReachTheirBandwidthBound) {
  const int n = 8;
  const double bw = 25.0;
  const Fabric f = fullyConnectedFabric(n, bw, 0.0);
  const uint64_t m = 256 * kMiB + 4 * 1000 * 7;  // not a whole number of slices
  const double ag = simulate(ring(Collective::kAllGather, n, m), f).timeUs;
  EXPECT_NEAR(ag / us((n - 1.0) / n * m, bw), 1.0, 0.01);
  const double rs = simulate(ring(Collective::kReduceScatter, n, m), f).timeUs;
  EXPECT_NEAR(rs / us((n - 1.0) / n * m, bw), 1.0, 0.01);
  const SimResult ar = simulate(ring(Collective::kAllReduce, n, 1024 * kMiB), f);
  EXPECT_NEAR(ar.timeUs / us(2 * (n - 1.0) / n * 1024 * kMiB, bw), 1.0, 0.01);
  // Every ring link carried 2(n-1)/n of the buffer; the others nothing.
  EXPECT_NEAR(ar.links[f.routes[0][1][0]].bytes, 2 * (n - 1.0) / n * 1024 * kMiB, 1e-3 * kMiB);
  EXPECT_DOUBLE_EQ(ar.links[f.routes[1][0][0]].bytes, 0.0);
  // Two channels split the bandwidth of the same links: no faster.
  const double ag2 = simulate(ring(Collective::kAllGather, n, m, 2), f).timeUs;
  EXPECT_NEAR(ag2 / ag, 1.0, 0.01);
}

// Ring steps move one slot (128 KiB) and each hop waits for the previous one's data, so every
// hop costs s/bw + alpha: (n-1)/n * M * (1/bw + alpha/s) for allgather, twice for allreduce.
TEST(Simulator, RingHopsPayTheLatency) {
  const int n = 4;
  const double bw = 20.0, alpha = 2.0;
  const Fabric f = fullyConnectedFabric(n, bw, alpha);
  const uint64_t m = n * 64 * 128 * 1024;  // 64 slot-sized rounds per rank
  const double perByte = 1 / (bw * kBytesPerUsPerGBs) + alpha / kSlice;
  EXPECT_NEAR(simulate(ring(Collective::kAllGather, n, m), f).timeUs, (n - 1.0) / n * m * perByte,
              1e-6);
  EXPECT_NEAR(simulate(ring(Collective::kAllReduce, n, m), f).timeUs,
              2 * (n - 1.0) / n * m * perByte, 1e-6);
}

// A reduce along the chain 0 -> 1 -> 2 -> 3 (root 3) pipelines slices: M/bw to stream the
// buffer, plus one slice and one latency per further hop: M/bw + (n-2) s/bw + (n-1) alpha.
TEST(Simulator, ChainReduceAndBroadcastPipelineSlices) {
  const int n = 4;
  const double bw = 10.0, alpha = 1.0;
  const Fabric f = chainFabric(n, bw, alpha);
  const uint64_t m = 64 * kMiB;
  const double expect = us(m, bw) + (n - 2) * us(kSlice, bw) + (n - 1) * alpha;
  const SimResult reduce = simulate(ring(Collective::kReduce, n, m, 1, 3), f);
  EXPECT_NEAR(reduce.timeUs, expect, 1e-6);
  EXPECT_EQ(reduce.lastStep.rank, 3);
  // Broadcast from rank 0 runs the same chain the other way round the ring's order.
  EXPECT_NEAR(simulate(ring(Collective::kBroadcast, n, m, 1, 0), f).timeUs, expect, 1e-6);
  // With larger slices (coarsened steps) the pipeline fill grows, the streaming term stays.
  SimOptions coarse;
  coarse.maxSlicesPerStep = 64;  // 1 MiB slices
  EXPECT_NEAR(simulate(ring(Collective::kReduce, n, m, 1, 3), f, coarse).timeUs,
              us(m, bw) + (n - 2) * us(kMiB, bw) + (n - 1) * alpha, 1e-6);
}

TEST(Simulator, TreeReduceOnAChainIsBoundedBelowByTheCut) {
  const Fabric f = chainFabric(5, 10.0, 1.0);
  plan::Spec spec;
  spec.coll = Collective::kReduce;
  spec.nranks = 5;
  spec.root = 0;
  spec.count = 16 * kMiB / 4;
  const SimResult r = simulate(algo::build("tree", spec), f);
  const Bound b = lowerBound(Collective::kReduce, f, 16 * kMiB, 0);
  EXPECT_GE(r.timeUs, b.timeUs);
  EXPECT_EQ(r.lastStep.rank, 0);
}

TEST(Simulator, ReceiveWithoutSendIsAnError) {
  const Fabric f = fullyConnectedFabric(3, 10.0);
  plan::Plan p = p2pPlan(3);
  addLane(p, 0, 0, {sendTo(1, 100)});
  addLane(p, 1, 0, {recvFrom(0, 100), recvFrom(2, 100)});
  const std::string e = simError(p, f);
  EXPECT_NE(e.find("rank 1 lane 0 step 1"), std::string::npos) << e;
  EXPECT_NE(e.find("no matching send"), std::string::npos) << e;
  // And the reverse: a send nobody receives.
  plan::Plan q = p2pPlan(3);
  addLane(q, 0, 0, {sendTo(1, 100), sendTo(2, 100)});
  addLane(q, 1, 0, {recvFrom(0, 100)});
  const std::string e2 = simError(q, f);
  EXPECT_NE(e2.find("rank 0 lane 0 step 1"), std::string::npos) << e2;
  EXPECT_NE(e2.find("no matching receive"), std::string::npos) << e2;
  // Channels are separate FIFOs.
  plan::Plan c = p2pPlan(3);
  addLane(c, 0, 1, {sendTo(1, 100)});
  addLane(c, 1, 0, {recvFrom(0, 100)});
  EXPECT_NE(simError(c, f).find("no matching"), std::string::npos);
}

TEST(Simulator, MessageSizesMustAgree) {
  const Fabric f = fullyConnectedFabric(2, 10.0);
  plan::Plan p = p2pPlan(2);
  addLane(p, 0, 0, {sendTo(1, 100)});
  addLane(p, 1, 0, {recvFrom(0, 200)});
  const std::string e = simError(p, f);
  EXPECT_NE(e.find("receives 200 elements"), std::string::npos) << e;
}

TEST(Simulator, EveryRankReceivingFirstDeadlocks) {
  const Fabric f = fullyConnectedFabric(3, 10.0);
  plan::Plan p = p2pPlan(3);
  for (int r = 0; r < 3; ++r)
    addLane(p, r, 0, {recvFrom((r + 2) % 3, 100), sendTo((r + 1) % 3, 100)});
  const std::string e = simError(p, f);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("waits for data from rank"), std::string::npos) << e;
  // Sending first is fine.
  plan::Plan ok = p2pPlan(3);
  for (int r = 0; r < 3; ++r)
    addLane(ok, r, 0, {sendTo((r + 1) % 3, 100), recvFrom((r + 2) % 3, 100)});
  EXPECT_EQ(simError(ok, f), "");
}

TEST(Simulator, BigMessagesBothWaysDeadlockOnFullFifos) {
  // Both ranks send 4 slices before receiving, into FIFOs of 2 slots.
  const Fabric f = fullyConnectedFabric(2, 10.0);
  plan::Plan p = p2pPlan(2);
  for (int r = 0; r < 2; ++r)
    addLane(p, r, 0, {sendTo(1 - r, 4 * kSlice), recvFrom(1 - r, 4 * kSlice)});
  SimOptions o;
  o.fifoSlots = 2;
  const std::string e = simError(p, f, o);
  EXPECT_NE(e.find("waits for a free slot towards rank"), std::string::npos) << e;
  o.fifoSlots = 4;
  EXPECT_EQ(simError(p, f, o), "");
}

TEST(Simulator, DependencyCycleDeadlocks) {
  const Fabric f = fullyConnectedFabric(1, 10.0);
  plan::Plan p = p2pPlan(1);
  plan::Step a, b;
  a.deps = {{1, 0}};
  b.deps = {{0, 0}};
  addLane(p, 0, 0, {a});
  addLane(p, 0, 1, {b});
  const std::string e = simError(p, f);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("waits for rank 0 lane"), std::string::npos) << e;
}

TEST(Simulator, DependenciesOrderLanes) {
  // Lane 1 sends only after lane 0's send: the two transfers do not overlap.
  const Fabric f = fullyConnectedFabric(3, 10.0, 1.0);
  plan::Plan p = p2pPlan(3);
  addLane(p, 0, 0, {sendTo(1, kMiB)});
  plan::Step second = sendTo(2, kMiB);
  second.deps = {{0, 0}};
  addLane(p, 0, 1, {second});
  addLane(p, 1, 0, {recvFrom(0, kMiB)});
  addLane(p, 2, 1, {recvFrom(0, kMiB)});
  const SimResult r = simulate(p, f);
  EXPECT_NEAR(r.timeUs, 2 * us(kMiB, 10.0) + 1.0, 1e-9);
  EXPECT_EQ(r.lastStep.rank, 2);
  ASSERT_GE(r.criticalPath.size(), 2u);
  EXPECT_EQ(r.criticalPath[r.criticalPath.size() - 2].waitedFor, "dependency");
}

TEST(Simulator, TwoLanesOnOneFifoAtOnceAreRejected) {
  const Fabric f = fullyConnectedFabric(2, 10.0);
  plan::Plan p = p2pPlan(2);
  addLane(p, 0, 0, {sendTo(1, kMiB)});
  addLane(p, 0, 0, {sendTo(1, kMiB)});
  addLane(p, 1, 0, {recvFrom(0, kMiB), recvFrom(0, kMiB)});
  const std::string e = simError(p, f);
  EXPECT_NE(e.find("both send to rank 1 on channel 0 at once"), std::string::npos) << e;
  // A dependency orders them.
  p.programs[0].lanes[1].steps[0].deps = {{0, 0}};
  EXPECT_EQ(simError(p, f), "");
}

TEST(Simulator, BadPlansAreRejected) {
  const Fabric f = fullyConnectedFabric(2, 10.0);
  plan::Plan p = p2pPlan(3);
  EXPECT_NE(simError(p, f).find("3 ranks but the fabric has 2"), std::string::npos);
  plan::Plan q = p2pPlan(2);
  addLane(q, 0, 0, {sendTo(5, 10)});
  EXPECT_NE(simError(q, f).find("send peer out of range"), std::string::npos);
  Fabric broken = f;
  broken.routes[0][1] = {7};
  EXPECT_NE(simError(q, broken).find("routes"), std::string::npos);
  plan::Plan d = p2pPlan(2);
  plan::Step nop;
  nop.deps = {{3, 0}};
  addLane(d, 0, 0, {nop});
  EXPECT_NE(simError(d, f).find("does not exist"), std::string::npos);
}

TEST(Simulator, ChunkPlanAtAByteSize) {
  // Allgather on two ranks in MSCCL chunks: copy own chunk, send it, receive the other.
  plan::ChunkPlan cp;
  cp.name = "ag2";
  cp.coll = Collective::kAllGather;
  cp.nranks = 2;
  cp.chunksPerLoop = 2;
  for (int r = 0; r < 2; ++r) {
    plan::ChunkProgram prog;
    prog.inputChunks = 1;
    prog.outputChunks = 2;
    plan::Lane lane;
    plan::Step copy;
    copy.op = plan::Op::kCopy;
    copy.src = {plan::kInput, 0};
    copy.dst = {plan::kOutput, static_cast<uint64_t>(r)};
    copy.count = 1;
    plan::Step send = sendTo(1 - r, 1);
    send.src = {plan::kInput, 0};
    plan::Step recv = recvFrom(1 - r, 1);
    recv.dst = {plan::kOutput, static_cast<uint64_t>(1 - r)};
    lane.steps = {copy, send, recv};
    prog.lanes.push_back(lane);
    cp.programs.push_back(prog);
  }
  const Fabric f = fullyConnectedFabric(2, 25.0, 1.0);
  // 2 MiB of output: each rank sends its 1 MiB (8 slices: both send before they receive, so
  // the message must fit the FIFO's 8 slots).
  EXPECT_EQ(countForBytes(Collective::kAllGather, 2, 2 * kMiB, 4), kMiB / 4);
  EXPECT_NEAR(simulate(cp, 2 * kMiB, f).timeUs, 1.0 + us(kMiB, 25.0), 1e-9);
  const std::string e = simError(plan::instantiate(cp, kMiB / 2), f);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  // A size that does not split into whole chunks is rounded up to one that does.
  EXPECT_GT(simulate(cp, 6, f).timeUs, 1.0);
}

// Every plan of the built-in algorithms takes at least the lower bound on the same fabric.
TEST(Simulator, NeverBeatsTheLowerBound) {
  const Fabric dgx1 = goldenFabric("dgx1-v100.xml");
  const Fabric star = starFabric(6, 30.0, 0.7);
  for (const Fabric* f : {&dgx1, &star}) {
    const int n = f->nranks;
    for (const algo::Algorithm& a : algo::all()) {
      if (std::string(a.name) == "hier") continue;
      for (Collective c : a.colls) {
        for (uint64_t bytes : {uint64_t{4096} * n, 8 * kMiB * n}) {
          plan::Spec spec;
          spec.coll = c;
          spec.nranks = n;
          spec.root = 1;
          spec.count = countForBytes(c, n, bytes, 4);
          const SimResult r = simulate(algo::build(a.name, spec), *f);
          const Bound b = lowerBound(c, *f, bytes, 1);
          EXPECT_GE(r.timeUs, b.timeUs * (1 - 1e-9))
              << a.name << " " << plan::collectiveName(c) << " " << bytes << " B";
          // No link is busy longer than the plan runs or carries more than its bandwidth allows.
          for (size_t l = 0; l < r.links.size(); ++l) {
            EXPECT_LE(r.links[l].busyUs, r.timeUs * (1 + 1e-9));
            EXPECT_LE(r.links[l].bytes,
                      f->links[l].bw * kBytesPerUsPerGBs * r.links[l].busyUs * (1 + 1e-9) + 1e-6);
          }
        }
      }
    }
  }
}

// Across two NDv2 hosts (one 12.5 GB/s NIC each) the flat ring crosses the network with every
// byte twice per direction; the hierarchical allreduce crosses it once and is about twice as
// fast. Both stay above the bound.
TEST(Simulator, HierarchicalBeatsTheFlatRingAcrossHosts) {
  const Fabric f = goldenFabric("ndv2-x2.xml");
  plan::Spec spec;
  spec.coll = Collective::kAllReduce;
  spec.nranks = f.nranks;
  spec.count = 64 * kMiB / 4;
  algo::Options o;
  o.hostOf = f.hostOf;
  o.channels = 2;
  const double flat = simulate(algo::build("ring", spec, o), f).timeUs;
  const double hier = simulate(algo::build("hier", spec, o), f).timeUs;
  const double bound = lowerBound(Collective::kAllReduce, f, 64 * kMiB).timeUs;
  EXPECT_GE(hier, bound);
  EXPECT_LT(hier * 1.5, flat);
  std::printf("ndv2-x2 allreduce 64 MiB: ring %.0f us, hier %.0f us, bound %.0f us\n", flat, hier,
              bound);
}

// The published MSCCL algorithms (../shared/msccl-xml) run on the machines they were written for,
// never faster than the bound.
TEST(Simulator, PublishedMscclPlansOnTheirMachines) {
  const std::string dir = std::string(WEFT_SHARED_DIR) + "/msccl-xml/";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " is absent";
  struct Case {
    const char* file;
    const char* machine;
    uint64_t bytes;
  };
  for (const Case& c : {Case{"ndv4/ap2ll.xml", "dgx-a100.xml", 64 * 1024},
                        Case{"ndv4/r48ll.xml", "dgx-a100.xml", 64 * kMiB},
                        Case{"ndv5/ag-1m.xml", "dgx-h100.xml", kMiB},
                        Case{"ndv5/ar-1m.xml", "dgx-h100.xml", kMiB}}) {
    SCOPED_TRACE(c.file);
    const plan::ChunkPlan cp = plan::importMscclFile(dir + c.file);
    const Fabric f = goldenFabric(c.machine);
    const SimResult r = simulate(cp, c.bytes, f);
    const Bound b = lowerBound(cp.coll, f, c.bytes, cp.root);
    EXPECT_GE(r.timeUs, b.timeUs);
    std::printf("%s on %s at %llu B: %.2f us, bound %.2f us (ratio %.3f)\n", c.file, c.machine,
                static_cast<unsigned long long>(c.bytes), r.timeUs, b.timeUs, b.timeUs / r.timeUs);
  }
}

TEST(Simulator, RingOnDgx1AgainstTheBound) {
  const Fabric f = goldenFabric("dgx1-v100.xml");
  const uint64_t m = 256 * kMiB;
  for (Collective c : {Collective::kAllGather, Collective::kAllReduce}) {
    const SimResult r = simulate(ring(c, 8, m, 2), f);
    const Bound b = lowerBound(c, f, m);
    const double ratio = b.timeUs / r.timeUs;
    EXPECT_GT(ratio, 0.0);
    EXPECT_LE(ratio, 1.0);
    std::printf(
        "DGX-1 ring %s of 256 MiB, 2 channels: %.1f us, bound %.1f us, ratio %.3f "
        "(busbw %.1f of %.1f GB/s)\n%s",
        plan::collectiveName(c), r.timeUs, b.timeUs, ratio, b.busBw * ratio, b.busBw,
        r.summary(f).c_str());
  }
}

}  // namespace
}  // namespace weft::synth
