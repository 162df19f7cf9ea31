// Lowering: the transfer modes and store kinds each step gets from the communicator's Tuning,
// decided once per Work, before the interpreter runs it; and the operator's lowering into the
// Work (lowerOperator) with the division finishWork applies.
#include "src/exec/lower.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "algorithms/registry.h"

namespace weft::exec {
namespace {

using plan::Collective;
using plan::Op;

// One rank's Work of a built-in plan over buffers of its own.
struct Built {
  std::shared_ptr<const plan::Plan> plan;
  std::vector<std::vector<char>> memory;
  Work work;
};

Built build(const char* algorithm, Collective coll, int nranks, uint64_t count, int rank,
            bool inPlace, const Tuning* tuning) {
  plan::Spec spec;
  spec.coll = coll;
  spec.nranks = nranks;
  spec.count = count;
  Built b;
  b.plan = std::make_shared<const plan::Plan>(algo::build(algorithm, spec));
  const plan::Program& program = b.plan->programs[rank];
  const plan::BufferSizes sizes = plan::bufferSizes(spec, rank);
  b.memory.emplace_back(sizes.input * 4 + 64);
  b.memory.emplace_back(sizes.output * 4 + 64);
  b.memory.emplace_back(program.scratchElems * 4 + 64);
  b.work.plan = b.plan;
  b.work.program = &program;
  b.work.rank = rank;
  b.work.type = DataType::kFloat32;
  b.work.buffers = {b.memory[0].data(), inPlace ? b.memory[0].data() : b.memory[1].data(),
                    b.memory[2].data()};
  b.work.laneTags.assign(program.lanes.size(), 1);
  b.work.tuning = tuning;
  return b;
}

// Calls f(step, lowered step) for every step of the Work.
template <class F>
void eachStep(const Built& b, const Lowered& L, F&& f) {
  for (size_t l = 0; l < b.work.program->lanes.size(); ++l)
    for (size_t i = 0; i < b.work.program->lanes[l].steps.size(); ++i)
      f(b.work.program->lanes[l].steps[i], L.steps[L.laneFirst[l] + i]);
}

TEST(Lower, OutputsStreamFromTheTuningsThreshold) {
  Tuning t;
  t.streamAllReduceBytes = 64 * 1024;  // a 1 MiB allreduce's output is past it
  Built b = build("ring", Collective::kAllReduce, 4, 1 << 18, 1, /*inPlace=*/false, &t);
  Lowered L;
  lower(b.work, &L);
  int streamed = 0, outputs = 0;
  eachStep(b, L, [&](const plan::Step& s, const LoweredStep& low) {
    if (!plan::opWritesDst(s.op)) return;
    if (s.dst.buffer == plan::kOutput) {
      ++outputs;
      if (low.store == Store::kStreaming) ++streamed;
    } else {
      EXPECT_EQ(low.store, Store::kCached) << "only the output streams";
    }
  });
  EXPECT_GT(outputs, 0);
  EXPECT_EQ(streamed, outputs);

  t.streamAllReduceBytes = 0;  // never
  lower(b.work, &L);
  eachStep(b, L, [&](const plan::Step&, const LoweredStep& low) {
    EXPECT_EQ(low.store, Store::kCached);
  });
}

TEST(Lower, OutputOverTheInputStaysCached) {
  Tuning t;
  t.streamAllReduceBytes = 64 * 1024;
  Built b = build("ring", Collective::kAllReduce, 4, 1 << 18, 2, /*inPlace=*/true, &t);
  Lowered L;
  lower(b.work, &L);
  eachStep(b, L, [&](const plan::Step&, const LoweredStep& low) {
    EXPECT_EQ(low.store, Store::kCached) << "in place: the rank has just read these lines";
  });
}

TEST(Lower, ByReferenceFromTheRendezvousThreshold) {
  Tuning t;
  Built b = build("ring", Collective::kAllGather, 3, 4096, 0, false, &t);
  Lowered L;
  lower(b.work, &L);
  EXPECT_EQ(L.rdvBytes, 4096u);
  int refs = 0;
  eachStep(b, L, [&](const plan::Step& s, const LoweredStep& low) {
    EXPECT_EQ(low.mayRef, plan::opSends(s.op) && s.op != Op::kRecvReduceSend);
    refs += low.mayRef;
  });
  EXPECT_GT(refs, 0);

  t.sharedCores = true;  // readers may be descheduled: larger slices only
  lower(b.work, &L);
  EXPECT_EQ(L.rdvBytes, 32768u);
  t.rendezvousSetting = 100;  // WEFT_RDV_BYTES wins
  lower(b.work, &L);
  EXPECT_EQ(L.rdvBytes, 100u);

  b.work.byReference = false;  // e.g. an in-place send/recv pair: never by reference
  lower(b.work, &L);
  eachStep(b, L, [&](const plan::Step&, const LoweredStep& low) { EXPECT_FALSE(low.mayRef); });
}

TEST(Lower, AnInPlaceAllReduceWaitsForLargerSlices) {
  Tuning t;
  Built b = build("ring", Collective::kAllReduce, 2, 4096, 0, /*inPlace=*/true, &t);
  Lowered L;
  lower(b.work, &L);
  EXPECT_EQ(L.rdvBytes, 32768u) << "it reduces into the buffer its messages name";
}

TEST(Lower, LandingsOnlyWhereTheTuningAllowsThem) {
  Tuning t;
  Built b = build("ring", Collective::kAllReduce, 3, 1 << 16, 0, false, &t);
  Lowered L;
  lower(b.work, &L);
  int lands = 0;
  eachStep(b, L, [&](const plan::Step& s, const LoweredStep& low) {
    const bool forwards = s.op == Op::kRecvReduceCopySend || s.op == Op::kRecvCopySend;
    EXPECT_EQ(low.mayLand, forwards) << plan::opName(s.op);
    EXPECT_EQ(low.offers, s.op == Op::kRecv);
    lands += low.mayLand;
  });
  EXPECT_GT(lands, 0);
  t.landingBytes = 0;  // WEFT_LANDING_BYTES=0: never
  lower(b.work, &L);
  eachStep(b, L, [&](const plan::Step&, const LoweredStep& low) {
    EXPECT_FALSE(low.mayLand);
    EXPECT_FALSE(low.offers);
  });
}

TEST(Lower, LargeReferencesOnlyWhereRanksShareCores) {
  Tuning t;
  Built b = build("direct", Collective::kBroadcast, 4, 1 << 20, 0, false, &t);
  Lowered L;
  lower(b.work, &L);
  EXPECT_EQ(L.bigRefBytes, 0u);
  eachStep(b, L, [&](const plan::Step&, const LoweredStep& low) { EXPECT_FALSE(low.bigRefs); });
  t.sharedCores = true;
  lower(b.work, &L);
  EXPECT_EQ(L.bigRefBytes, t.sharedRefBytes);
  int big = 0;
  eachStep(b, L, [&](const plan::Step& s, const LoweredStep& low) {
    EXPECT_EQ(low.bigRefs, s.op == Op::kSend);
    big += low.bigRefs;
  });
  EXPECT_GT(big, 0);
}

TEST(Lower, SmallExchangesMayHoldASharedCore) {
  Built small = build("ring", Collective::kAllReduce, 4, 64, 0, false, nullptr);
  Built large = build("ring", Collective::kAllReduce, 4, 1 << 20, 0, false, nullptr);
  Built root = build("direct", Collective::kBroadcast, 4, 64, 0, false, nullptr);
  Lowered L;
  lower(small.work, &L);
  EXPECT_TRUE(L.holdsCore);
  lower(large.work, &L);
  EXPECT_FALSE(L.holdsCore) << "its work outweighs a context switch";
  lower(root.work, &L);
  EXPECT_FALSE(L.holdsCore) << "a rank that only sends gains nothing";
}

TEST(Lower, PreMulSumScalesReadsOfTheInputOnly) {
  Built b = build("ring", Collective::kAllReduce, 3, 3000, 1, false, nullptr);
  b.work.op = RedOp::kPreMulSum;
  Lowered L;
  lower(b.work, &L);
  int scaled = 0;
  eachStep(b, L, [&](const plan::Step& s, const LoweredStep& low) {
    EXPECT_EQ(low.scaled, s.src.buffer == plan::kInput && plan::opReadsSrc(s.op));
    scaled += low.scaled;
  });
  EXPECT_GT(scaled, 0);
}

TEST(Lower, KeptForTheSameStampLoweredAgainForAnother) {
  Tuning t;
  Built b = build("ring", Collective::kAllReduce, 2, 1024, 0, false, &t);
  b.work.stamp = nextWorkStamp();
  Lowered L;
  lower(b.work, &L);
  EXPECT_EQ(L.stamp, b.work.stamp);
  EXPECT_NE(nextWorkStamp(), b.work.stamp);
}

// Avg's integer division is part of the Work: finishWork applies it to the rank's result (the
// one element rule, elements::divide) before the Work's own finish.
TEST(Lower, IntegerAverageDividesTheResultWhenTheWorkFinishes) {
  Built b = build("ring", Collective::kAllReduce, 3, 5, 0, false, nullptr);
  b.work.type = DataType::kInt32;
  lowerOperator(&b.work, RedOp::kAvg, Scalar{});
  EXPECT_EQ(b.work.op, RedOp::kSum);
  ASSERT_EQ(b.work.divisor, 3u);
  ASSERT_EQ(b.work.divideCount, 5u);
  const int32_t sums[5] = {9, -9, 10, -10, 2};
  std::memcpy(b.work.buffers[plan::kOutput], sums, sizeof sums);
  bool finished = false;
  b.work.finish = [&] { finished = true; };
  finishWork(b.work);
  int32_t got[5];
  std::memcpy(got, b.work.buffers[plan::kOutput], sizeof got);
  EXPECT_EQ(std::vector<int32_t>(got, got + 5), (std::vector<int32_t>{3, -3, 3, -3, 0}));
  EXPECT_TRUE(finished);
  EXPECT_TRUE(lowersToPreMulSum(RedOp::kAvg, DataType::kBfloat16));
  EXPECT_FALSE(lowersToPreMulSum(RedOp::kAvg, DataType::kInt32));
  EXPECT_TRUE(lowersToPreMulSum(RedOp::kPreMulSum, DataType::kInt32));
}

}  // namespace
}  // namespace weft::exec
