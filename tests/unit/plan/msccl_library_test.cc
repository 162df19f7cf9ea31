// The plan library's selection rules (collective, ranks, in/out of place, byte window, equal
// chunks, messages that fit a slot, PreMulSum), its preference between plans, the checks add()
// makes, and how the selector weighs library plans against built-in algorithms under NCCL_ALGO.
#include <gtest/gtest.h>

#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/plan/verifier.h"
#include "src/select/plan_library.h"
#include "src/select/selector.h"

namespace weft::select {
namespace {

// A 2-rank allreduce over 2 chunks: each rank reduces one half and sends it back.
std::string pairXml(bool inPlace, uint64_t minBytes, uint64_t maxBytes, const char* name = "p") {
  std::string out = inPlace ? "i" : "o";
  std::string x = std::string("<algo name=\"") + name +
                  "\" proto=\"Simple\" nchannels=\"1\" "
                  "nchunksperloop=\"2\" ngpus=\"2\" coll=\"allreduce\" inplace=\"" +
                  (inPlace ? "1" : "0") + "\" outofplace=\"" + (inPlace ? "0" : "1") +
                  "\" minBytes=\"" + std::to_string(minBytes) + "\" maxBytes=\"" +
                  std::to_string(maxBytes) + "\">\n";
  for (int r = 0; r < 2; ++r) {
    const std::string me = std::to_string(r), peer = std::to_string(1 - r);
    x += "<gpu id=\"" + me + "\" i_chunks=\"2\" o_chunks=\"" + (inPlace ? "0" : "2") +
         "\" s_chunks=\"0\"><tb id=\"0\" send=\"" + peer + "\" recv=\"" + peer + "\" chan=\"0\">" +
         "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"" + peer +
         "\" dstbuf=\"o\" dstoff=\"-1\" "
         "cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
         "<step s=\"1\" type=\"rrcs\" srcbuf=\"i\" srcoff=\"" +
         me + "\" dstbuf=\"" + out + "\" dstoff=\"" + me +
         "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>"
         "<step s=\"2\" type=\"r\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"" +
         out + "\" dstoff=\"" + peer +
         "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu>\n";
  }
  return x + "</algo>\n";
}

plan::ChunkPlan pair(bool inPlace, uint64_t minBytes = 0, uint64_t maxBytes = 0,
                     const char* name = "p") {
  return plan::importMsccl(pairXml(inPlace, minBytes, maxBytes, name));
}

LibraryQuery query(uint64_t count, bool inPlace) {
  LibraryQuery q;
  q.coll = plan::Collective::kAllReduce;
  q.nranks = 2;
  q.count = count;
  q.elemSize = 4;
  q.inPlace = inPlace;
  return q;
}

TEST(PlanLibrary, AddChecksThePlan) {
  PlanLibrary lib;
  EXPECT_EQ(lib.add(pair(false), "pair").id, 0);
  // The same steps without the final receive: what the peer sends back is never received.
  plan::ChunkPlan broken = pair(false);
  for (auto& prog : broken.programs) prog.lanes[0].steps.pop_back();
  try {
    lib.add(broken, "broken");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("plan library: broken: at count 2: plan verifier: ", 0), 0u) << m;
    EXPECT_NE(m.find("that no step of rank 1 receives"), std::string::npos) << m;
  }
  EXPECT_EQ(lib.plans().size(), 1u);
  lib.add(broken, "unchecked", 0, /*verify=*/false);  // a caller that verified elsewhere
  EXPECT_EQ(lib.plans().size(), 2u);
  EXPECT_NE(checkLibraryPlan(broken, true).error, "");
  EXPECT_EQ(checkLibraryPlan(pair(true), true).error, "");
  EXPECT_FALSE(lib.plans()[0].streams) << "both ranks send a whole chunk before receiving";
  EXPECT_TRUE(lib.plans()[0].pieces) << "in pieces, each message fits a slot";
}

TEST(PlanLibrary, MatchRules) {
  PlanLibrary lib;
  lib.add(pair(false, 16, 1024), "oop");
  lib.add(pair(true, 16, 1024), "ip");
  ASSERT_NE(lib.match(query(64, false)), nullptr);
  EXPECT_EQ(lib.match(query(64, false))->source, "oop");
  EXPECT_EQ(lib.match(query(64, true))->source, "ip");
  EXPECT_EQ(lib.match(query(2, false)), nullptr) << "8 bytes: below minBytes";
  EXPECT_NE(lib.match(query(4, false)), nullptr) << "16 bytes: the window is inclusive";
  EXPECT_NE(lib.match(query(256, false)), nullptr);
  EXPECT_EQ(lib.match(query(258, false)), nullptr) << "past maxBytes";
  EXPECT_EQ(lib.match(query(63, false)), nullptr) << "63 does not split into 2 chunks";
  LibraryQuery q = query(64, false);
  q.nranks = 3;
  EXPECT_EQ(lib.match(q), nullptr);
  q = query(64, false);
  q.coll = plan::Collective::kReduceScatter;
  EXPECT_EQ(lib.match(q), nullptr);
  // The in-place-only allreduce runs on the output: out-of-place calls and PreMulSum too.
  PlanLibrary ipOnly;
  ipOnly.add(pair(true, 16, 1024), "ip");
  q = query(64, false);
  q.scalesInput = true;
  ASSERT_NE(ipOnly.match(q), nullptr);
  EXPECT_TRUE(runsOnOutput(*ipOnly.match(q)->plan));
  EXPECT_FALSE(runsOnOutput(pair(false)));
  // 64 floats in 2 chunks = 128-byte messages: past a 124-byte slot the plan runs in pieces, so
  // its window alone decides.
  q = query(64, false);
  q.slotBytes = 128;
  EXPECT_NE(lib.match(q), nullptr);
  q.slotBytes = 124;
  EXPECT_NE(lib.match(q), nullptr);
}

// A 2-rank allgather whose ranks copy their 3 input chunks one at a time but send all 3 in one
// step before receiving the peer's: a piece of that send is 3 messages, more than two slots
// hold, so neither whole nor in pieces does it run with messages past a slot.
plan::ChunkPlan bulkPair() {
  plan::ChunkPlan p;
  p.name = "bulk";
  p.coll = plan::Collective::kAllGather;
  p.nranks = 2;
  p.chunksPerLoop = 6;
  p.inPlace = false;
  using plan::Op;
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    plan::ChunkProgram prog;
    prog.inputChunks = 3;
    prog.outputChunks = 6;
    plan::Lane copies{0, {}};
    for (uint64_t c = 0; c < 3; ++c)
      copies.steps.push_back(plan::Step{Op::kCopy,
                                        -1,
                                        -1,
                                        {plan::kInput, c},
                                        {plan::kOutput, 3 * static_cast<uint64_t>(r) + c},
                                        1,
                                        {}});
    plan::Lane exchange{
        0,
        {plan::Step{Op::kSend, peer, -1, {plan::kInput, 0}, {}, 3, {}},
         plan::Step{
             Op::kRecv, -1, peer, {}, {plan::kOutput, 3 * static_cast<uint64_t>(peer)}, 3, {}}}};
    prog.lanes = {copies, exchange};
    p.programs.push_back(prog);
  }
  return p;
}

TEST(PlanLibrary, PlansWhosePiecesFailKeepToOneSlot) {
  PlanLibrary lib;
  lib.add(bulkPair(), "bulk");
  EXPECT_FALSE(lib.plans()[0].streams);
  EXPECT_FALSE(lib.plans()[0].pieces);
  EXPECT_NE(lib.describe().find("messages up to one FIFO slot (its pieces fail verification)"),
            std::string::npos)
      << lib.describe();
  // 96 floats: chunks of 32, messages of 3 chunks = 384 bytes.
  LibraryQuery q = query(96, false);
  q.coll = plan::Collective::kAllGather;
  q.slotBytes = 384;
  EXPECT_NE(lib.match(q), nullptr);
  q.slotBytes = 380;
  EXPECT_EQ(lib.match(q), nullptr);
}

// A 2-rank broadcast from rank 0 whose receiver writes its "i": in-place only, and not run on
// the output (broadcast's input matters at the root alone), so it keeps MSCCL's restrictions.
plan::ChunkPlan broadcastInPlace() {
  std::string x =
      "<algo name=\"b\" proto=\"LL\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"2\" "
      "coll=\"broadcast\" inplace=\"1\" outofplace=\"0\" minBytes=\"0\" maxBytes=\"0\">"
      "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"1\" "
      "recv=\"-1\" chan=\"0\"><step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
      "dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu>"
      "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\"><tb id=\"0\" send=\"-1\" "
      "recv=\"0\" chan=\"0\"><step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"i\" "
      "dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/></tb></gpu></algo>";
  return plan::importMsccl(x);
}

TEST(PlanLibrary, OtherInPlaceOnlyPlansOnlyInPlaceWithoutPreMulSum) {
  PlanLibrary lib;
  lib.add(broadcastInPlace(), "bcast");
  EXPECT_FALSE(runsOnOutput(*lib.plans()[0].plan));
  LibraryQuery q = query(8, true);
  q.coll = plan::Collective::kBroadcast;
  EXPECT_NE(lib.match(q), nullptr);
  q.inPlace = false;
  EXPECT_EQ(lib.match(q), nullptr);
  q.inPlace = true;
  q.scalesInput = true;
  EXPECT_EQ(lib.match(q), nullptr);
  q.scalesInput = false;
  q.root = 1;
  EXPECT_EQ(lib.match(q), nullptr) << "written for root 0";
}

TEST(PlanLibrary, RunOnOutputFormVerifiesBothWays) {
  plan::ChunkPlan cp = pair(true);
  for (uint64_t count : {2, 8, 34}) {
    plan::Plan p = instantiateLibraryPlan(cp, count, 4, "msccl:p");
    EXPECT_EQ(p.algorithm, "msccl:p");
    EXPECT_TRUE(p.inPlaceSafe);
    EXPECT_TRUE(p.outOfPlaceSafe);
    ASSERT_EQ(p.programs[0].lanes.size(), 2u) << "the plan's lane and the copy lane";
    EXPECT_EQ(p.programs[0].lanes[1].steps[0].op, plan::Op::kCopy);
    EXPECT_EQ(p.programs[0].lanes[0].steps[0].deps.size(), 1u);
    EXPECT_EQ(p.programs[0].lanes[0].steps[0].src.buffer, plan::kOutput);
    EXPECT_EQ(plan::verifyMessage(p), "") << count;
  }
}

// The same exchange with every transfer in a lane of its own: nothing waits behind its own
// send, so it streams and any size is fine.
plan::ChunkPlan split() {
  plan::ChunkPlan p = pair(false);
  using plan::Op;
  for (int r = 0; r < 2; ++r) {
    const int peer = 1 - r;
    const plan::Ref mine{plan::kInput, static_cast<uint64_t>(r)};
    const plan::Ref theirs{plan::kInput, static_cast<uint64_t>(peer)};
    const plan::Ref out{plan::kOutput, static_cast<uint64_t>(r)};
    const plan::Ref outPeer{plan::kOutput, static_cast<uint64_t>(peer)};
    p.programs[r].lanes = {
        plan::Lane{0, {plan::Step{Op::kSend, peer, -1, theirs, {}, 1, {}}}},
        plan::Lane{0, {plan::Step{Op::kRecvReduceCopy, -1, peer, mine, out, 1, {}}}},
        plan::Lane{1, {plan::Step{Op::kSend, peer, -1, out, {}, 1, {{1, 0}}}}},
        plan::Lane{1, {plan::Step{Op::kRecv, -1, peer, {}, outPeer, 1, {}}}},
    };
  }
  return p;
}

TEST(PlanLibrary, StreamingPlansHaveNoSlotLimit) {
  plan::ChunkPlan p = split();
  PlanLibrary lib;
  lib.add(p, "split");
  EXPECT_TRUE(lib.plans()[0].streams);
  EXPECT_FALSE(lib.plans()[0].pieces) << "runs whole";
  LibraryQuery q = query(1 << 20, false);
  q.slotBytes = 4096;
  EXPECT_NE(lib.match(q), nullptr);
  lib.add(pair(false), "pair");
  EXPECT_FALSE(lib.plans()[1].streams);
  EXPECT_NE(lib.describe().find("from pair; runs in pieces where its messages exceed a FIFO slot"),
            std::string::npos)
      << lib.describe();
  EXPECT_EQ(lib.describe().find("from split;"), std::string::npos);
  EXPECT_EQ(lib.describe().find("messages up to one FIFO slot"), std::string::npos);
}

TEST(PlanLibrary, PreferenceFilesFirstThenCheapest) {
  PlanLibrary lib;
  lib.add(pair(false, 0, 0, "slow"), "synth:slow", 50.0);
  lib.add(pair(false, 0, 0, "fast"), "synth:fast", 5.0);
  EXPECT_EQ(lib.match(query(64, false))->plan->name, "fast");
  lib.add(pair(false, 0, 0, "file"), "/plans/file.xml");
  lib.add(pair(false, 0, 0, "file2"), "/plans/file2.xml");
  EXPECT_EQ(lib.match(query(64, false))->plan->name, "file") << "files win, in load order";
  EXPECT_NE(lib.describe().find("msccl 'fast' (allreduce, 2 ranks, 0-any bytes, out of place "
                                "only) from synth:fast, predicted 5 us"),
            std::string::npos)
      << lib.describe();
}

plan::Spec spec(uint64_t count) {
  plan::Spec s;
  s.coll = plan::Collective::kAllReduce;
  s.nranks = 2;
  s.count = count;
  return s;
}

TEST(PlanLibrary, SelectorWeighsPredictedCosts) {
  auto cheap = std::make_shared<PlanLibrary>();
  cheap->add(pair(false, 0, 0, "cheap"), "synth", 1e-6);
  auto dear = std::make_shared<PlanLibrary>();
  dear->add(pair(false, 0, 0, "dear"), "synth", 1e9);
  auto file = std::make_shared<PlanLibrary>();
  file->add(pair(false, 0, 0, "file"), "file.xml");

  Selector s(2, LinkModel{}, AlgoFilter(""));
  EXPECT_NE(s.choose(spec(64), CallTraits{}).algorithm.rfind("msccl", 0), 0u) << "no library";
  s.setLibrary(cheap, 128 * 1024);
  Choice c = s.choose(spec(64), CallTraits{});
  EXPECT_EQ(c.algorithm, "msccl:cheap#0");
  ASSERT_NE(c.chunkPlan, nullptr);
  EXPECT_EQ(c.chunkPlanSource, "synth");
  EXPECT_EQ(s.choose(spec(64), CallTraits{true, false}).chunkPlan, nullptr)
      << "an out-of-place-only plan is not used in place";
  s.setLibrary(dear, 128 * 1024);
  EXPECT_EQ(s.choose(spec(64), CallTraits{}).chunkPlan, nullptr) << "built-ins predicted faster";
  s.setLibrary(file, 128 * 1024);
  EXPECT_EQ(s.choose(spec(64), CallTraits{}).algorithm, "msccl:file#0") << "files: MSCCL's rule";

  Selector forced(2, LinkModel{}, AlgoFilter("msccl"));
  forced.setLibrary(dear, 128 * 1024);
  EXPECT_EQ(forced.choose(spec(64), CallTraits{}).algorithm, "msccl:dear#0");
  // 63 floats do not split into 2 chunks: no plan, and NCCL_ALGO allows nothing else.
  try {
    forced.choose(spec(63), CallTraits{});
    ADD_FAILURE() << "a forced msccl without a plan ran something else";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInvalidUsage);
    const std::string m = e.what();
    EXPECT_NE(m.find("no plan matches this call: 2 ranks, 252 bytes (63 x 4), out of place"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("windows loaded: 'dear' (allreduce, 2 ranks, 0-any bytes, out of place only)"),
              std::string::npos)
        << m;
  }
  // The score table still prints, its pick "none" where no plan matches.
  EXPECT_NE(forced.table().find("  none\n"), std::string::npos) << forced.table();
  // Names Weft does not know leave no algorithm either, but no library was asked for: the
  // model's choice runs, as before.
  Selector unknown(2, LinkModel{}, AlgoFilter("nvls"));
  EXPECT_FALSE(unknown.choose(spec(63), CallTraits{}).algorithm.empty());

  for (const char* filter : {"^msccl", "ring", "allreduce:^msccl", "allreduce:ring;msccl"}) {
    Selector no(2, LinkModel{}, AlgoFilter(filter));
    no.setLibrary(file, 128 * 1024);
    EXPECT_EQ(no.choose(spec(64), CallTraits{}).chunkPlan, nullptr) << filter;
  }
  Selector perColl(2, LinkModel{}, AlgoFilter("allreduce:msccl;ring"));
  perColl.setLibrary(file, 128 * 1024);
  EXPECT_NE(perColl.choose(spec(64), CallTraits{}).chunkPlan, nullptr);
  EXPECT_NE(perColl.table().find("plan library: 1 plans"), std::string::npos);
}

TEST(PlanLibrary, ProcessPlansJoinEveryNewLibrary) {
  unsetenv("MSCCL_ALGO_DIR");
  unsetenv("WEFT_PLAN_DIR");
  EXPECT_TRUE(libraryFromEnvironment(Tuning::fromEnvironment())->empty());
  addProcessPlan(pair(true, 0, 0, "synth"), "synth:test", 3.5);
  plan::ChunkPlan broken = pair(true);
  broken.programs[1].lanes.clear();
  EXPECT_THROW(addProcessPlan(broken, "synth:broken"), Error);
  auto lib = libraryFromEnvironment(Tuning::fromEnvironment());
  ASSERT_EQ(lib->plans().size(), 1u);
  EXPECT_EQ(lib->plans()[0].source, "synth:test");
  EXPECT_EQ(lib->plans()[0].predictedUs, 3.5);
  EXPECT_NE(lib->match(query(64, true)), nullptr);
  clearProcessPlans();
  EXPECT_TRUE(libraryFromEnvironment(Tuning::fromEnvironment())->empty());
}

}  // namespace
}  // namespace weft::select
