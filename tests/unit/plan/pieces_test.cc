// cutIntoPieces: piece counts, where each sub-step lands, how dependencies follow their piece,
// and that pieced plans of allpairs exchanges, built-in algorithms and the published MSCCL files
// pass the symbolic verifier with every message in one slot of a two-slot FIFO.
#include "src/plan/pieces.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"
#include "src/select/plan_library.h"

namespace weft::plan {
namespace {

const std::string kMsccl = WEFT_SHARED_MSCCL;

bool haveShared() {
  struct stat st;
  return ::stat(kMsccl.c_str(), &st) == 0;
}

// An n-rank allgather where every rank sends its whole input to each peer before receiving
// that peer's (MSCCL's allpairs): lane p of rank r talks to peer p only.
ChunkPlan allpairsAllGather(int n) {
  ChunkPlan cp;
  cp.name = "allpairs";
  cp.coll = Collective::kAllGather;
  cp.nranks = n;
  cp.chunksPerLoop = n;
  cp.inPlace = false;
  for (int r = 0; r < n; ++r) {
    ChunkProgram prog;
    prog.inputChunks = 1;
    prog.outputChunks = n;
    Lane local;
    Step copy;
    copy.op = Op::kCopy;
    copy.src = Ref{kInput, 0};
    copy.dst = Ref{kOutput, static_cast<uint64_t>(r)};
    copy.count = 1;
    local.steps.push_back(copy);
    prog.lanes.push_back(local);
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      Lane lane;
      Step send;
      send.op = Op::kSend;
      send.sendPeer = p;
      send.src = Ref{kInput, 0};
      send.count = 1;
      Step recv;
      recv.op = Op::kRecv;
      recv.recvPeer = p;
      recv.dst = Ref{kOutput, static_cast<uint64_t>(p)};
      recv.count = 1;
      lane.steps = {send, recv};
      prog.lanes.push_back(lane);
    }
    cp.programs.push_back(prog);
  }
  return cp;
}

VerifyOptions oneSlotMessages(uint64_t maxMessage, int slots = 2) {
  VerifyOptions o;
  o.sliceElems = maxMessage;
  o.fifoSlots = slots;
  return o;
}

size_t steps(const Plan& p, int rank) {
  size_t n = 0;
  for (const Lane& l : p.programs[rank].lanes) n += l.steps.size();
  return n;
}

TEST(Pieces, AllpairsDeadlocksWholeAndRunsInPieces) {
  const Plan whole = instantiate(allpairsAllGather(4), 40);
  // Messages of 40 elements through two 8-element slots: every rank blocks in its sends.
  EXPECT_NE(verifyMessage(whole, oneSlotMessages(8)).find("deadlock"), std::string::npos)
      << verifyMessage(whole, oneSlotMessages(8));
  PieceShape shape;
  const Plan pieced = cutIntoPieces(whole, PieceOptions{8, 1}, &shape);
  EXPECT_EQ(shape.unitElems, 40u);
  EXPECT_EQ(shape.pieces, 5u);
  EXPECT_EQ(largestMessage(pieced), 8u);
  EXPECT_EQ(steps(pieced, 0), 5 * steps(whole, 0));
  EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(8)), "");
  // Piece k of lane 1's send covers part k of the input; its receive part k of peer 1's slot.
  const Lane& lane = pieced.programs[0].lanes[1];
  ASSERT_EQ(lane.steps.size(), 10u);
  for (uint64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(lane.steps[2 * k].op, Op::kSend);
    EXPECT_EQ(lane.steps[2 * k].src.offset, 8 * k);
    EXPECT_EQ(lane.steps[2 * k + 1].dst.offset, 40 + 8 * k);
    EXPECT_EQ(lane.steps[2 * k + 1].count, 8u);
  }
  EXPECT_EQ(pieced.programs[0].lanes[1].channel, whole.programs[0].lanes[1].channel);
}

TEST(Pieces, UnevenAndAlignedParts) {
  // 41 elements a unit, at most 8 a message, parts on multiples of 4: 11 groups of 4 (the last
  // holds 1) into 6 parts of at most 2 groups.
  const Plan whole = instantiate(allpairsAllGather(3), 41);
  PieceShape shape;
  const Plan pieced = cutIntoPieces(whole, PieceOptions{8, 4}, &shape);
  EXPECT_EQ(shape.pieces, 6u);
  uint64_t total = 0;
  for (const Step& s : pieced.programs[1].lanes[1].steps) {
    EXPECT_LE(s.count, 8u);
    if (s.op == Op::kSend) {
      EXPECT_EQ(s.src.offset, total);
      EXPECT_EQ(s.src.offset % 4, 0u);
      total += s.count;
    }
  }
  EXPECT_EQ(total, 41u);
  EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(8)), "");
  // Odd counts with alignment 1, the limit not dividing the unit.
  EXPECT_EQ(verifyMessage(cutIntoPieces(instantiate(allpairsAllGather(3), 37), {5, 1}),
                          oneSlotMessages(5)),
            "");
}

TEST(Pieces, DependenciesPointIntoTheirOwnPiece) {
  // Lane 1's first step waits for the local copy (lane 0, step 0).
  Plan whole = instantiate(allpairsAllGather(2), 12);
  for (Program& prog : whole.programs) prog.lanes[1].steps[0].deps.push_back(StepRef{0, 0});
  ASSERT_EQ(verifyMessage(whole), "");
  PieceShape shape;
  const Plan pieced = cutIntoPieces(whole, PieceOptions{4, 1}, &shape);
  ASSERT_EQ(shape.pieces, 3u);
  const Lane& lane = pieced.programs[0].lanes[1];
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(lane.steps[2 * k].deps.size(), 1u);
    EXPECT_EQ(lane.steps[2 * k].deps[0].lane, 0);
    EXPECT_EQ(lane.steps[2 * k].deps[0].step, k);
    EXPECT_TRUE(lane.steps[2 * k + 1].deps.empty());
  }
  EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(4)), "");
}

TEST(Pieces, PlansThatFitAreLeftAlone) {
  const Plan whole = instantiate(allpairsAllGather(4), 40);
  PieceShape shape;
  const Plan same = cutIntoPieces(whole, PieceOptions{40, 1}, &shape);
  EXPECT_EQ(shape.pieces, 1u);
  EXPECT_EQ(shape.unitElems, 0u);
  EXPECT_EQ(toText(same), toText(whole));
  EXPECT_THROW(cutIntoPieces(whole, PieceOptions{0, 1}), Error);
}

TEST(Pieces, MultiUnitStepsSplitPerUnit) {
  // A 2-rank allgather of 2-chunk inputs: each rank copies its own two chunks one at a time but
  // sends both in one step. Pieces follow chunks, so a piece of the send is two sub-steps.
  ChunkPlan cp = allpairsAllGather(2);
  cp.chunksPerLoop = 4;
  for (int r = 0; r < 2; ++r) {
    ChunkProgram& prog = cp.programs[r];
    prog.inputChunks = 2;
    prog.outputChunks = 4;
    Step second = prog.lanes[0].steps[0];
    prog.lanes[0].steps[0].dst.offset = 2 * r;
    second.src.offset = 1;
    second.dst.offset = 2 * r + 1;
    prog.lanes[0].steps.push_back(second);
    prog.lanes[1].steps[0].count = 2;
    prog.lanes[1].steps[1].count = 2;
    prog.lanes[1].steps[1].dst.offset = 2 * (1 - r);
  }
  const Plan whole = instantiate(cp, 12);  // 6-element chunks, 12-element messages
  PieceShape shape;
  const Plan pieced = cutIntoPieces(whole, PieceOptions{4, 1}, &shape);
  EXPECT_EQ(shape.unitElems, 6u);
  EXPECT_EQ(shape.pieces, 2u);
  // Each piece of a 2-unit step is two sub-steps: part k of each unit.
  const Lane& lane = pieced.programs[0].lanes[1];
  ASSERT_EQ(lane.steps.size(), 8u);
  EXPECT_EQ(lane.steps[0].src.offset, 0u);
  EXPECT_EQ(lane.steps[1].src.offset, 6u);
  EXPECT_EQ(lane.steps[4].src.offset, 3u);
  EXPECT_EQ(lane.steps[5].src.offset, 9u);
  EXPECT_EQ(largestMessage(pieced), 3u);
  EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(3)), "");
  // A unit that fits: whole units per message, no pieces.
  const Plan runs = cutIntoPieces(whole, PieceOptions{7, 1}, &shape);
  EXPECT_EQ(shape.pieces, 1u);
  EXPECT_EQ(largestMessage(runs), 6u);
  EXPECT_EQ(verifyMessage(runs, oneSlotMessages(6)), "");
}

struct BuiltIn {
  const char* algorithm;
  Collective coll;
};

TEST(Pieces, BuiltInAlgorithmsStayCorrect) {
  const BuiltIn cases[] = {
      {"ring", Collective::kAllReduce},      {"ring", Collective::kAllGather},
      {"ring", Collective::kReduceScatter},  {"ring", Collective::kBroadcast},
      {"rhd", Collective::kAllReduce},       {"rhd", Collective::kAllGather},
      {"direct", Collective::kAllGather},    {"direct", Collective::kAllReduce},
      {"tree", Collective::kAllReduce},      {"rsag", Collective::kAllReduce},
      {"direct", Collective::kReduceScatter}};
  for (const BuiltIn& c : cases)
    for (int n : {3, 4}) {
      SCOPED_TRACE(std::string(c.algorithm) + " " + collectiveName(c.coll) + " " +
                   std::to_string(n) + " ranks");
      if (!algo::supports(c.algorithm, c.coll)) continue;
      Spec spec{c.coll, n, 0, 240, 4};
      const Plan whole = algo::build(c.algorithm, spec);
      ASSERT_EQ(verifyMessage(whole), "");
      // Parts of a third of a unit: three or four pieces.
      const uint64_t unit = pieceShape(whole, PieceOptions{1, 1}).unitElems;
      ASSERT_GT(unit, 0u);
      const uint64_t limit = std::max<uint64_t>(1, unit / 3);
      PieceShape shape;
      const Plan pieced = cutIntoPieces(whole, PieceOptions{limit, 1}, &shape);
      EXPECT_GE(shape.pieces, 3u);
      EXPECT_LE(largestMessage(pieced), limit);
      // A piece of a step over several units sends one message per unit back to back: the
      // FIFO must hold them all where the plan sends before it receives.
      uint64_t mostUnits = 1;
      for (const Program& prog : whole.programs)
        for (const Lane& lane : prog.lanes)
          for (const Step& s : lane.steps) mostUnits = std::max(mostUnits, s.count / unit);
      const int slots = static_cast<int>(std::max<uint64_t>(2, mostUnits + 1));
      EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(limit, slots)), "");
    }
}

TEST(Pieces, PublishedMscclFiles) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  for (const char* file :
       {"ndv4/ap2ll.xml", "ndv4/r48ll.xml", "ndv5/ag-1m.xml", "ndv5/ar-1m.xml"}) {
    SCOPED_TRACE(file);
    const ChunkPlan cp = importMscclFile(kMsccl + "/" + file);
    // Three elements a chunk, one a message: three pieces.
    const uint64_t count = 3 * cp.chunksPerLoop / sizeMultiplier(cp.coll, cp.nranks);
    const Plan whole = select::instantiateLibraryPlan(cp, count, 4);
    PieceShape shape;
    const Plan pieced = cutIntoPieces(whole, PieceOptions{1, 1}, &shape);
    EXPECT_EQ(shape.pieces, 3u);
    EXPECT_EQ(largestMessage(pieced), 1u);
    // The allpairs file sends 8 chunks to a peer before receiving 8: 8 one-slot messages.
    const int slots = std::string(file) == "ndv4/ap2ll.xml" ? 8 : 2;
    EXPECT_EQ(verifyMessage(pieced, oneSlotMessages(1, slots)), "");
  }
}

}  // namespace
}  // namespace weft::plan
