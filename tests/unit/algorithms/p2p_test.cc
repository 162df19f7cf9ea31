// p2pProgram: one lane per (peer, direction) keeping order, self send/recv pairs become copies;
// whole groups across ranks pass the verifier.
#include "algorithms/p2p/p2p.h"

#include <gtest/gtest.h>

#include "src/common/error.h"
#include "src/plan/verifier.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Op;
using plan::Plan;

P2pOp op(bool send, int peer, uint64_t count, uint16_t buffer) {
  return {send, peer, count, buffer};
}

Plan group(const std::vector<std::vector<P2pOp>>& ops) {
  Plan p;
  p.algorithm = "p2p";
  p.spec.coll = Collective::kSendRecv;
  p.spec.nranks = ops.size();
  p.inPlaceSafe = false;
  for (size_t r = 0; r < ops.size(); ++r) p.programs.push_back(p2pProgram(r, ops.size(), ops[r]));
  return p;
}

TEST(P2p, LanesPerPeerAndDirection) {
  plan::Program p = p2pProgram(
      0, 3, {op(true, 1, 10, 0), op(false, 1, 5, 1), op(true, 1, 7, 2), op(true, 2, 3, 0)});
  ASSERT_EQ(p.lanes.size(), 3u);
  ASSERT_EQ(p.lanes[0].steps.size(), 2u);  // both sends to 1, in order
  EXPECT_EQ(p.lanes[0].steps[0].count, 10u);
  EXPECT_EQ(p.lanes[0].steps[1].count, 7u);
  EXPECT_EQ(p.lanes[0].steps[1].src.buffer, plan::kExtra + 2);
  EXPECT_EQ(p.lanes[1].steps[0].op, Op::kRecv);
  EXPECT_EQ(p.lanes[1].steps[0].dst.buffer, plan::kExtra + 1);
  EXPECT_EQ(p.extraElems, (std::vector<uint64_t>{10, 5, 7}));
  for (const auto& l : p.lanes) EXPECT_EQ(l.channel, 0);
}

TEST(P2p, SelfPairsBecomeCopies) {
  plan::Program p = p2pProgram(1, 2, {op(false, 1, 4, 1), op(true, 1, 4, 0), op(true, 0, 2, 0)});
  ASSERT_EQ(p.lanes.size(), 2u);
  const auto& copy = p.lanes[1].steps.at(0);
  EXPECT_EQ(copy.op, Op::kCopy);
  EXPECT_EQ(copy.src.buffer, plan::kExtra + 0);
  EXPECT_EQ(copy.dst.buffer, plan::kExtra + 1);
  EXPECT_THROW(p2pProgram(0, 2, {op(true, 0, 4, 0)}), Error);
  EXPECT_THROW(p2pProgram(0, 2, {op(true, 0, 4, 0), op(false, 0, 5, 1)}), Error);
  EXPECT_THROW(p2pProgram(0, 2, {op(true, 2, 4, 0)}), Error);
}

TEST(P2p, GroupsVerify) {
  // Everyone exchanges with both neighbours, twice, plus a self copy and a zero-byte message.
  const int n = 5;
  std::vector<std::vector<P2pOp>> ops(n);
  for (int r = 0; r < n; ++r) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    ops[r] = {op(true, next, 100, 0), op(false, prev, 100, 1), op(false, next, 30, 2),
              op(true, prev, 30, 0),  op(true, next, 0, 0),    op(false, prev, 0, 1),
              op(true, r, 9, 0),      op(false, r, 9, 3)};
  }
  EXPECT_EQ(plan::verifyMessage(group(ops), {8, 1}), "");
  // A count mismatch between ranks is caught.
  ops[2][1].count = 99;
  EXPECT_NE(plan::verifyMessage(group(ops)).find("receives 99 elements"), std::string::npos);
}

}  // namespace
}  // namespace weft::algo
