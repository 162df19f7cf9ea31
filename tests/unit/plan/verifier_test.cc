// The verifier must accept correct plans and reject each kind of broken plan with a message that
// names the problem.
#include "src/plan/verifier.h"

#include <gtest/gtest.h>

#include "src/common/error.h"

namespace weft::plan {
namespace {

Step send(int to, Ref src, uint64_t n) {
  Step s;
  s.op = Op::kSend;
  s.sendPeer = to;
  s.src = src;
  s.count = n;
  return s;
}
Step recv(int from, Ref dst, uint64_t n) {
  Step s;
  s.op = Op::kRecv;
  s.recvPeer = from;
  s.dst = dst;
  s.count = n;
  return s;
}
Step rrc(int from, Ref src, Ref dst, uint64_t n) {
  Step s = recv(from, dst, n);
  s.op = Op::kRecvReduceCopy;
  s.src = src;
  return s;
}
Step local(Op op, Ref src, Ref dst, uint64_t n) {
  Step s;
  s.op = op;
  s.src = src;
  s.dst = dst;
  s.count = n;
  return s;
}
Step after(Step s, int lane, int step) {
  s.deps.push_back({lane, step});
  return s;
}
Lane lane(std::vector<Step> steps, int channel = 0) {
  Lane l;
  l.channel = channel;
  l.steps = std::move(steps);
  return l;
}

constexpr Ref kIn{kInput, 0};
constexpr Ref kOut{kOutput, 0};

Plan twoRanks(Collective c, uint64_t count) {
  Plan p;
  p.algorithm = "test";
  p.spec.coll = c;
  p.spec.nranks = 2;
  p.spec.count = count;
  p.programs.resize(2);
  return p;
}

// 2-rank allreduce: a send lane and a receive lane per rank. Not in-place safe: the receive may
// overwrite the input before the send has read it.
Plan goodAllReduce(uint64_t count) {
  Plan p = twoRanks(Collective::kAllReduce, count);
  p.inPlaceSafe = false;
  for (int r = 0; r < 2; ++r) {
    p.programs[r].lanes = {lane({send(1 - r, kIn, count)}), lane({rrc(1 - r, kIn, kOut, count)})};
  }
  return p;
}

void expectRejected(const Plan& p, const std::string& needle, VerifyOptions o = {}) {
  std::string m = verifyMessage(p, o);
  EXPECT_NE(m.find(needle), std::string::npos) << "message: '" << m << "'\n" << toText(p);
}

TEST(Verifier, AcceptsGoodPlan) {
  EXPECT_EQ(verifyMessage(goodAllReduce(100)), "");
  EXPECT_EQ(verifyMessage(goodAllReduce(100), {4, 1}), "");  // tiny FIFOs: still no deadlock
  EXPECT_EQ(verifyMessage(goodAllReduce(0)), "");
  EXPECT_NO_THROW(verify(goodAllReduce(7)));
}

TEST(Verifier, ThrowsInvalidArgument) {
  Plan p = goodAllReduce(8);
  p.programs[1].lanes.pop_back();
  try {
    verify(p);
    FAIL() << "accepted a broken plan";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInvalidArgument);
  }
}

TEST(Verifier, MissingReceive) {
  Plan p = goodAllReduce(8);
  p.programs[1].lanes.pop_back();  // rank 1 never receives rank 0's message
  expectRejected(p, "no step of rank 1 receives");
  // A message larger than the FIFO leaves the sender stuck instead.
  expectRejected(p, "deadlock", {2, 2});
}

TEST(Verifier, MissingSend) {
  Plan p = goodAllReduce(8);
  p.programs[1].lanes.erase(p.programs[1].lanes.begin());
  expectRejected(p, "waits for data from rank 1");
}

TEST(Verifier, SizeMismatch) {
  Plan p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].count = 4;
  expectRejected(p,
                 "receives 8 elements on channel 0 but rank 0 lane 0 step 0 (s to=1 n=4) sends 4");
}

TEST(Verifier, OutOfRange) {
  Plan p = goodAllReduce(8);
  p.programs[1].lanes[1].steps[0].dst.offset = 5;
  expectRejected(p, "rank 1 lane 1 step 0 (rrc from=0 n=8): dst output[5, 13) is out of bounds");
  p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].src.buffer = kScratch;  // no scratch allocated
  expectRejected(p, "out of bounds (scratch has 0 elements)");
  p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].src.buffer = kExtra + 2;
  expectRejected(p, "unknown buffer");
}

TEST(Verifier, BadPeer) {
  Plan p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].sendPeer = 0;
  expectRejected(p, "bad send peer 0");
  p.programs[0].lanes[0].steps[0].sendPeer = 2;
  expectRejected(p, "bad send peer 2");
}

TEST(Verifier, DependencyCycle) {
  Plan p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].deps.push_back({1, 0});
  p.programs[0].lanes[1].steps[0].deps.push_back({0, 0});
  expectRejected(p, "dependency cycle");
  p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].deps.push_back({0, 0});  // on itself
  expectRejected(p, "dependency cycle");
  p = goodAllReduce(8);
  p.programs[0].lanes[0].steps[0].deps.push_back({1, 3});
  expectRejected(p, "depends on missing step 1.3");
}

TEST(Verifier, DeadlockOnBoundedFifo) {
  // Both ranks send everything, then receive, on one lane: fine while the message fits the FIFO,
  // a deadlock once it does not.
  Plan p = twoRanks(Collective::kAllReduce, 1000);
  for (int r = 0; r < 2; ++r)
    p.programs[r].lanes = {lane({send(1 - r, kIn, 1000), rrc(1 - r, kIn, kOut, 1000)})};
  EXPECT_EQ(verifyMessage(p, {1000, 2}), "");
  EXPECT_EQ(verifyMessage(p, {500, 2}), "");
  expectRejected(p, "deadlock with FIFOs of 2 slots of 64 elements", {64, 2});
  expectRejected(p, "waits for a free slot towards rank 1", {64, 2});
  EXPECT_EQ(verifyMessage(p), "");  // the default 128 KiB slots hold 1000 4-byte elements
}

TEST(Verifier, WrongPostcondition) {
  // Rank 1 copies its own input instead of reducing: rank 0's contribution is missing.
  Plan p = goodAllReduce(8);
  p.programs[1].scratchElems = 8;
  p.programs[1].lanes = {lane({send(0, kIn, 8)}),
                         lane({recv(0, {kScratch, 0}, 8), local(Op::kCopy, kIn, kOut, 8)})};
  expectRejected(p,
                 "postcondition of allreduce: rank 1 output[0] holds ranks {1} of element 0, "
                 "expected ranks {0,1} of element 0");
  // Rank 0 adds its input a second time.
  p = goodAllReduce(8);
  p.programs[0].lanes[1].steps.push_back(local(Op::kReduce, kIn, kOut, 8));
  expectRejected(p, "counts rank 0's contribution to element 0 twice");
  // Elements shifted by one.
  p = goodAllReduce(8);
  p.programs[0].lanes[1].steps[0].dst.offset = 0;
  p.programs[0].lanes[1].steps[0].src.offset = 0;
  p.programs[1].lanes[0].steps[0].src.offset = 1;
  p.programs[1].lanes[0].steps[0].count = 7;
  p.programs[0].lanes[1].steps[0].count = 7;
  expectRejected(p, "combines copies of element 0 and element 1");
  // An output element nobody writes.
  p = goodAllReduce(8);
  for (int r = 0; r < 2; ++r) {
    p.programs[r].lanes[0].steps[0].count = 7;
    p.programs[r].lanes[1].steps[0].count = 7;
  }
  expectRejected(p, "output[7] is never written");
}

TEST(Verifier, UninitialisedRead) {
  Plan p = goodAllReduce(8);
  p.programs[0].scratchElems = 8;
  p.programs[0].lanes[0].steps[0].src = {kScratch, 0};
  expectRejected(p, "reads scratch[0], which holds no value yet");
}

TEST(Verifier, WritesInput) {
  Plan p = goodAllReduce(8);
  p.programs[0].lanes[1].steps[0].dst = kIn;
  expectRejected(p, "writes the input buffer");
}

TEST(Verifier, RaceBetweenLanes) {
  // Rank 0 also copies its input into the output on a third lane that nothing orders.
  Plan p = goodAllReduce(8);
  p.programs[0].lanes.push_back(lane({local(Op::kCopy, kIn, kOut, 8)}));
  expectRejected(p, "no dependency orders the two lanes");
}

TEST(Verifier, SharedFifoNeedsOrder) {
  // Rank 0 sends two halves to rank 1 from two lanes on the same channel.
  Plan p = twoRanks(Collective::kBroadcast, 8);
  p.programs[0].lanes = {lane({send(1, kIn, 4)}), lane({send(1, {kInput, 4}, 4)}),
                         lane({local(Op::kCopy, kIn, kOut, 8)})};
  p.programs[1].lanes = {lane({recv(0, kOut, 4), recv(0, {kOutput, 4}, 4)})};
  expectRejected(p, "may both send to rank 1 on channel 0 at once");
  // A dependency makes the order definite.
  p.programs[0].lanes[1].steps[0].deps.push_back({0, 0});
  EXPECT_EQ(verifyMessage(p), "");
  // So do different channels (with matching receive lanes).
  p.programs[0].lanes[1].steps[0].deps.clear();
  p.programs[0].lanes[1].channel = 1;
  p.programs[1].lanes = {lane({recv(0, kOut, 4)}), lane({recv(0, {kOutput, 4}, 4)}, 1)};
  EXPECT_EQ(verifyMessage(p), "");
}

TEST(Verifier, InPlaceRace) {
  // The send lane reads the input while the receive lane overwrites it (in place) unordered.
  Plan p = goodAllReduce(8);
  p.inPlaceSafe = true;
  expectRejected(p,
                 "(in-place) rank 1 lane 1 step 0 (rrc from=0 n=8) writes output[0] while "
                 "rank 1 lane 0 step 0 (s to=0 n=8) may still read it");
}

TEST(Verifier, InPlaceOverwrite) {
  // Rank 1 receives rank 0's data into its output, then reduces its own input into it, and only
  // then sends its input: right out of place, wrong in place (the input is gone by then).
  Plan p = twoRanks(Collective::kAllReduce, 8);
  p.programs[0].lanes = {lane({send(1, kIn, 8)}), lane({rrc(1, kIn, kOut, 8)})};
  p.programs[1].lanes = {
      lane({recv(0, kOut, 8), local(Op::kReduce, kIn, kOut, 8)}),
      lane({after(send(0, kIn, 8), 0, 0)}),
  };
  p.inPlaceSafe = false;
  EXPECT_EQ(verifyMessage(p), "");
  p.inPlaceSafe = true;
  expectRejected(p,
                 "(in-place) rank 1 lane 0 step 1 (re n=8) reads input[0] after it was "
                 "overwritten");
}

TEST(Verifier, InPlaceAllGatherLayout) {
  // 2-rank allgather: each rank copies its input into its block and exchanges blocks. In place
  // (input == output + rank * count) the copy is a no-op and the plan stays correct.
  Plan p = twoRanks(Collective::kAllGather, 4);
  for (int r = 0; r < 2; ++r)
    p.programs[r].lanes = {lane({send(1 - r, kIn, 4)}),
                           lane({local(Op::kCopy, kIn, {kOutput, uint64_t(4 * r)}, 4),
                                 recv(1 - r, {kOutput, uint64_t(4 * (1 - r))}, 4)})};
  EXPECT_EQ(verifyMessage(p), "");
  // Receiving into the wrong block overwrites the rank's own input in place.
  for (int r = 0; r < 2; ++r) p.programs[r].lanes[1].steps[1].dst.offset = 4 * r;
  expectRejected(p, "postcondition of allgather");
}

TEST(Verifier, WrongProgramCount) {
  Plan p = goodAllReduce(8);
  p.programs.pop_back();
  expectRejected(p, "1 programs for 2 ranks");
}

}  // namespace
}  // namespace weft::plan
