// MSCCL XML import and export: the published algorithm files read into the plans their text
// describes, pass the verifier, and round-trip; every class of malformed input is refused with a
// message naming the element, its line and the problem.
#include "src/plan/msccl_xml.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "src/common/error.h"
#include "src/plan/verifier.h"
#include "tests/support/text_file.h"

namespace weft::plan {
namespace {

using test::occurrences;
using test::readFile;

const std::string kMsccl = WEFT_SHARED_MSCCL;

bool haveShared() {
  struct stat st;
  return ::stat(kMsccl.c_str(), &st) == 0;
}

size_t laneCount(const ChunkPlan& p) {
  size_t n = 0;
  for (const auto& prog : p.programs) n += prog.lanes.size();
  return n;
}

size_t stepCount(const ChunkPlan& p, bool nops) {
  size_t n = 0;
  for (const auto& prog : p.programs)
    for (const auto& lane : prog.lanes)
      for (const auto& s : lane.steps) n += nops == (s.op == Op::kNop);
  return n;
}

// What each real file says (counted in its text by the test, not taken from the importer).
struct RealFile {
  const char* path;
  const char* name;
  Collective coll;
  uint64_t chunksPerLoop;
  const char* proto;
  uint64_t minBytes, maxBytes;
};
const RealFile kRealFiles[] = {
    {"ndv4/ap2ll.xml", "allreduce_pairs", Collective::kAllReduce, 128, "LL", 512, 40960},
    {"ndv4/r48ll.xml", "allreduce_ring_4channelsperring", Collective::kAllReduce, 64, "LL", 266240,
     2078720},
    {"ndv5/ag-1m.xml", "all_gather_llm", Collective::kAllGather, 32, "LL", 1048576, 2097151},
    {"ndv5/ar-1m.xml", "all_reduce_llm", Collective::kAllReduce, 16, "Simple", 1048576, 2097151},
};

TEST(MscclRealFiles, ImportMatchesTheText) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  for (const RealFile& f : kRealFiles) {
    SCOPED_TRACE(f.path);
    const std::string text = readFile(kMsccl + "/" + f.path);
    ChunkPlan p = importMscclFile(kMsccl + "/" + f.path);
    EXPECT_EQ(p.name, f.name);
    EXPECT_EQ(p.coll, f.coll);
    EXPECT_EQ(p.nranks, 8);
    EXPECT_EQ(p.programs.size(), 8u);
    EXPECT_EQ(p.chunksPerLoop, f.chunksPerLoop);
    EXPECT_EQ(p.proto, f.proto);
    EXPECT_TRUE(p.inPlace);
    EXPECT_FALSE(p.outOfPlace);
    EXPECT_EQ(p.minBytes, f.minBytes);
    EXPECT_EQ(p.maxBytes, f.maxBytes);
    EXPECT_EQ(laneCount(p), occurrences(text, "<tb "));
    // Every non-nop step is kept one for one; nops either stay or become dependencies.
    const size_t nops = occurrences(text, "type=\"nop\"");
    EXPECT_EQ(stepCount(p, false), occurrences(text, "<step ") - nops);
    EXPECT_LE(stepCount(p, true), nops);
  }
}

TEST(MscclRealFiles, AllpairsDetails) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  ChunkPlan p = importMscclFile(kMsccl + "/ndv4/ap2ll.xml");
  const ChunkProgram& g0 = p.programs[0];
  EXPECT_EQ(g0.inputChunks, 128u);
  EXPECT_EQ(g0.outputChunks, 0u);
  EXPECT_EQ(g0.scratchChunks, 112u);
  ASSERT_EQ(g0.lanes.size(), 16u);
  // tb 0: six leading nops fold into the first `re` (s=6, depid=2 deps=1), then six more `re`.
  const Lane& tb0 = g0.lanes[0];
  EXPECT_EQ(tb0.channel, 0);
  ASSERT_EQ(tb0.steps.size(), 7u);
  const Step& re = tb0.steps[0];
  EXPECT_EQ(re.op, Op::kReduce);
  EXPECT_EQ(re.src.buffer, kScratch);
  EXPECT_EQ(re.src.offset, 0u);
  EXPECT_EQ(re.dst.buffer, kInput);
  EXPECT_EQ(re.count, 1u);
  ASSERT_EQ(re.deps.size(), 7u);
  const int lanesWaited[] = {4, 6, 8, 10, 12, 14, 2};
  for (int k = 0; k < 7; ++k) {
    EXPECT_EQ(re.deps[k].lane, lanesWaited[k]);
    EXPECT_EQ(re.deps[k].step, 1) << "the `r` at s=1 of tb " << lanesWaited[k];
  }
  // tb 2: s to 1, r from 1 into scratch.
  const Lane& tb2 = g0.lanes[2];
  EXPECT_EQ(tb2.steps[0].op, Op::kSend);
  EXPECT_EQ(tb2.steps[0].sendPeer, 1);
  EXPECT_EQ(tb2.steps[0].src.offset, 8u);
  EXPECT_EQ(tb2.steps[0].count, 8u);
  EXPECT_EQ(tb2.steps[1].op, Op::kRecv);
  EXPECT_EQ(tb2.steps[1].recvPeer, 1);
  EXPECT_EQ(tb2.steps[1].dst.buffer, kScratch);
  // Its s=20 send waits for tb 0's last `re` (file s=12, plan step 6).
  bool found = false;
  for (const Step& s : tb2.steps)
    if (s.op == Op::kSend && s.src.offset == 0 && s.src.buffer == kInput) {
      found = true;
      ASSERT_FALSE(s.deps.empty());
      EXPECT_EQ(s.deps.back().lane, 0);
      EXPECT_EQ(s.deps.back().step, 6);
    }
  EXPECT_TRUE(found);
}

TEST(MscclRealFiles, RoundTripAndStableExport) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  for (const RealFile& f : kRealFiles) {
    SCOPED_TRACE(f.path);
    ChunkPlan p = importMscclFile(kMsccl + "/" + f.path);
    std::string x = exportMsccl(p);
    ChunkPlan back = importMsccl(x, "exported");
    EXPECT_EQ(chunkPlanDifference(p, back), "");
    EXPECT_EQ(exportMsccl(back), x);
  }
}

TEST(MscclRealFiles, VerifierAcceptsInstantiatedPlansInPlace) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  for (const RealFile& f : kRealFiles) {
    ChunkPlan cp = importMscclFile(kMsccl + "/" + f.path);
    const uint64_t unit = f.coll == Collective::kAllGather ? f.chunksPerLoop / 8 : f.chunksPerLoop;
    for (uint64_t count : {unit, 3 * unit, 5 * unit}) {
      SCOPED_TRACE(std::string(f.path) + " count " + std::to_string(count));
      Plan plan = instantiate(cp, count);
      EXPECT_TRUE(plan.inPlaceSafe);
      EXPECT_FALSE(plan.outOfPlaceSafe);
      EXPECT_EQ(verifyMessage(plan), "");
    }
  }
}

TEST(MscclRealFiles, AllpairsNeedsWholeMessagesInFlight) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  // MSCCL runs the whole program once per slice, so a tb may send 8 chunks to a peer before it
  // receives 8 from it. Weft runs each step over its whole range: that holds only while every
  // message fits the FIFO, which is why the plan library takes a plan only for counts whose
  // largest message fits one slot. With one-element slots the same plan deadlocks.
  ChunkPlan cp = importMscclFile(kMsccl + "/ndv4/ap2ll.xml");
  VerifyOptions tiny;
  tiny.sliceElems = 1;
  EXPECT_NE(verifyMessage(instantiate(cp, 128), tiny).find("deadlock"), std::string::npos);
}

TEST(MscclRealFiles, InPlaceOnlyPlansFailOutOfPlace) {
  if (!haveShared()) GTEST_SKIP() << kMsccl << " is absent";
  // Marked usable out of place, the allpairs plan writes the user's send buffer: refused.
  ChunkPlan cp = importMscclFile(kMsccl + "/ndv4/ap2ll.xml");
  Plan plan = instantiate(cp, 128);
  plan.outOfPlaceSafe = true;
  EXPECT_NE(verifyMessage(plan).find("writes the input buffer"), std::string::npos);
}

// ---- A small valid plan: 2-rank out-of-place allreduce over 2 chunks, plus a copy lane. ----

std::string gpuXml(int r) {
  const int peer = 1 - r;
  std::ostringstream o;
  o << "  <gpu id=\"" << r << "\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"1\">\n"
    << "    <tb id=\"0\" send=\"" << peer << "\" recv=\"" << peer << "\" chan=\"0\">\n"
    << "      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"" << peer
    << "\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
    << "      <step s=\"1\" type=\"rrc\" srcbuf=\"i\" srcoff=\"" << r << "\" dstbuf=\"o\" dstoff=\""
    << r << "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"/>\n"
    << "      <step s=\"2\" type=\"s\" srcbuf=\"o\" srcoff=\"" << r
    << "\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
    << "      <step s=\"3\" type=\"r\" srcbuf=\"i\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"" << peer
    << "\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
    << "    </tb>\n"
    << "    <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n"
    << "      <step s=\"0\" type=\"cpy\" srcbuf=\"o\" srcoff=\"" << r
    << "\" dstbuf=\"s\" dstoff=\"0\" cnt=\"1\" depid=\"0\" deps=\"1\" hasdep=\"0\"/>\n"
    << "    </tb>\n"
    << "  </gpu>\n";
  return o.str();
}

std::string validXml() {
  return "<!-- two ranks -->\n"
         "<algo name=\"pairs2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
         "coll=\"allreduce\" inplace=\"0\" outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\">\n" +
         gpuXml(0) + gpuXml(1) + "</algo>\n";
}

// `text` with the first occurrence of `from` (after `after`, if given) replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to,
                     const std::string& after = "") {
  size_t start = after.empty() ? 0 : text.find(after);
  EXPECT_NE(start, std::string::npos) << after;
  size_t at = text.find(from, start);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Imports `text` and expects a refusal whose message contains every string in `needles`.
void expectRefused(const std::string& text, std::vector<std::string> needles) {
  try {
    importMsccl(text, "t.xml");
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInvalidArgument);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("t.xml", 0), 0u) << msg;
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << msg << "\nlacks: " << n;
  }
}

TEST(MscclImport, SmallPlanReadsAndVerifies) {
  ChunkPlan p = importMsccl(validXml());
  ASSERT_EQ(p.programs.size(), 2u);
  EXPECT_FALSE(p.inPlace);
  EXPECT_TRUE(p.outOfPlace);
  const Lane& l0 = p.programs[1].lanes[0];
  EXPECT_EQ(l0.steps[1].op, Op::kRecvReduceCopy);
  EXPECT_EQ(l0.steps[1].recvPeer, 0);
  EXPECT_EQ(l0.steps[1].sendPeer, -1) << "a step that does not send carries no send peer";
  EXPECT_EQ(l0.steps[0].dst.buffer, kInput) << "unused operands stay at their defaults";
  EXPECT_EQ(l0.steps[0].dst.offset, 0u);
  ASSERT_EQ(p.programs[1].lanes[1].steps[0].deps.size(), 1u);
  for (uint64_t count : {2, 6, 10}) {
    Plan plan = instantiate(p, count);
    EXPECT_TRUE(plan.outOfPlaceSafe);
    EXPECT_FALSE(plan.inPlaceSafe);
    EXPECT_EQ(verifyMessage(plan), "") << count;
  }
}

TEST(MscclImport, ToleratesRcclExtrasCommentsAndDeclarations) {
  std::string x =
      replaced(validXml(), "maxBytes=\"0\"", "maxBytes=\"0\" maxcount=\"2\" nthreadblocks=\"4\"");
  x = "<?xml version=\"1.0\"?>\n" + replaced(x, "<tb id=\"1\"", "<!-- copy lane -->\n<tb id=\"1\"");
  ChunkPlan p = importMsccl(x);
  EXPECT_EQ(chunkPlanDifference(p, importMsccl(validXml())), "");
}

// A plan built in code with what files rarely hold: several dependencies on one step, a kept
// nop others wait for, a trailing nop, recv-reduce in place, every step type.
ChunkPlan handBuilt() {
  ChunkPlan p;
  p.name = "hand <built> & \"quoted\"";
  p.coll = Collective::kBroadcast;
  p.nranks = 3;
  p.root = 2;
  p.chunksPerLoop = 4;
  p.proto = "LL128";
  p.inPlace = true;
  p.outOfPlace = true;
  p.minBytes = 16;
  p.maxBytes = 1 << 20;
  p.programs.resize(3);
  for (int r = 0; r < 3; ++r) {
    ChunkProgram& g = p.programs[r];
    g.inputChunks = g.outputChunks = 4;
    g.scratchChunks = 2;
    Step send{Op::kSend, (r + 1) % 3, -1, Ref{kInput, 1}, Ref{}, 2, {}};
    Step recv{Op::kRecv, -1, (r + 2) % 3, Ref{}, Ref{kScratch, 0}, 2, {}};
    Step rr{Op::kRecvReduce, -1, (r + 2) % 3, Ref{}, Ref{kOutput, 2}, 1, {}};
    Step rcs{Op::kRecvCopySend, (r + 1) % 3, (r + 2) % 3, Ref{}, Ref{kOutput, 0}, 1, {}};
    Step rrs{Op::kRecvReduceSend, (r + 1) % 3, (r + 2) % 3, Ref{kOutput, 3}, Ref{}, 1, {}};
    Step rrcs{Op::kRecvReduceCopySend, (r + 1) % 3, (r + 2) % 3, Ref{kScratch, 1},
              Ref{kOutput, 1},         1,           {}};
    Step rrc{Op::kRecvReduceCopy, -1, (r + 2) % 3, Ref{kScratch, 0}, Ref{kOutput, 3}, 1, {}};
    Step nop{Op::kNop, -1, -1, Ref{}, Ref{}, 0, {{0, 0}}};
    Step cpy{Op::kCopy, -1, -1, Ref{kInput, 0}, Ref{kOutput, 0}, 4, {{0, 1}, {1, 0}}};
    Step re{Op::kReduce, -1, -1, Ref{kScratch, 0}, Ref{kOutput, 1}, 1, {{0, 0}, {0, 1}, {1, 0}}};
    Step last{Op::kNop, -1, -1, Ref{}, Ref{}, 0, {{0, 2}, {0, 3}}};
    g.lanes.push_back(Lane{0, {send, recv, rr, rcs, rrs, rrcs, rrc}});
    g.lanes.push_back(Lane{3, {nop, cpy}});
    g.lanes.push_back(Lane{1, {re, last}});
  }
  return p;
}

TEST(MscclExport, HandBuiltPlanRoundTrips) {
  ChunkPlan p = handBuilt();
  std::string x = exportMsccl(p);
  EXPECT_NE(x.find("root=\"2\""), std::string::npos);
  EXPECT_NE(x.find("nchannels=\"4\""), std::string::npos);
  EXPECT_NE(x.find("hand &lt;built&gt; &amp; &quot;quoted&quot;"), std::string::npos);
  ChunkPlan back = importMsccl(x, "exported");
  EXPECT_EQ(chunkPlanDifference(p, back), "") << x;
  EXPECT_EQ(exportMsccl(back), x);
}

TEST(MscclExport, FollowsMscclToolsRules) {
  std::string x = exportMsccl(handBuilt());
  // Lane 2's reduce has three dependencies: two nops in front of it, then the step itself.
  // Lane 1's nop (step 0) is waited on by nobody, lane 0's send (step 0) by two steps: hasdep.
  std::istringstream in(x);
  std::string line, lane2;
  int tb = -1, gpu = -1;
  std::vector<std::string> gpu0tb0, gpu0tb2;
  while (std::getline(in, line)) {
    if (line.find("<gpu ") != std::string::npos) ++gpu;
    if (line.find("<tb ") != std::string::npos) tb = line[line.find("id=\"") + 4] - '0';
    if (gpu == 0 && tb == 0 && line.find("<step") != std::string::npos) gpu0tb0.push_back(line);
    if (gpu == 0 && tb == 2 && line.find("<step") != std::string::npos) gpu0tb2.push_back(line);
  }
  ASSERT_EQ(gpu0tb2.size(), 5u);  // 2 nops + re + 1 nop + trailing nop
  EXPECT_NE(gpu0tb2[0].find("type=\"nop\""), std::string::npos);
  EXPECT_NE(gpu0tb2[0].find("depid=\"0\" deps=\"0\""), std::string::npos);
  EXPECT_NE(gpu0tb2[1].find("depid=\"0\" deps=\"1\""), std::string::npos);
  EXPECT_NE(gpu0tb2[2].find("s=\"2\" type=\"re\""), std::string::npos);
  EXPECT_NE(gpu0tb2[2].find("depid=\"1\" deps=\"0\""), std::string::npos)
      << "lane 2's reduce waits for lane 1's nop, which therefore stays a step";
  EXPECT_NE(gpu0tb0[0].find("hasdep=\"1\""), std::string::npos);
  EXPECT_NE(gpu0tb0[4].find("hasdep=\"0\""), std::string::npos);
  EXPECT_NE(gpu0tb0[0].find("dstbuf=\"o\" dstoff=\"-1\""), std::string::npos);
  EXPECT_NE(gpu0tb0[2].find("type=\"rrc\" srcbuf=\"o\" srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\""),
            std::string::npos)
      << "recv-reduce in place is rrc with src = dst";
  EXPECT_NE(x.find("<tb id=\"0\" send=\"1\" recv=\"2\" chan=\"0\">"), std::string::npos);
}

TEST(MscclExport, RefusesWhatMscclCannotSay) {
  ChunkPlan p = handBuilt();
  p.programs[0].lanes[0].steps[3].sendPeer = 2;  // one lane, two send peers
  try {
    exportMsccl(p);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sends to ranks 1 and 2"), std::string::npos) << e.what();
  }
  ChunkPlan q = handBuilt();
  q.programs[1].lanes[0].steps[0].src.buffer = kExtra;
  EXPECT_THROW(exportMsccl(q), Error);
  ChunkPlan c = handBuilt();
  c.programs[2].lanes[1].steps[0].deps.push_back({1, 1});  // waits on a later step of its own lane
  EXPECT_THROW(exportMsccl(c), Error);
  ChunkPlan s = handBuilt();
  s.coll = Collective::kSendRecv;
  EXPECT_THROW(exportMsccl(s), Error);
  ChunkPlan t = handBuilt();
  t.programs[0].lanes[0].sendChannel = 1;  // a thread block has one channel
  try {
    exportMsccl(t);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one channel"), std::string::npos) << e.what();
  }
}

// ---- One test per class of malformed input. ----

TEST(MscclMalformed, NotXml) { expectRefused("<algo name=\"x\"", {"t.xml:1:", "XML parse error"}); }

TEST(MscclMalformed, WrongTopLevel) {
  expectRefused("<algorithm/>", {"<algorithm>", "must be <algo>"});
  expectRefused(validXml() + "<algo/>", {"second top-level element"});
  expectRefused("<!-- nothing -->", {"t.xml:1:", "No document element"});
}

TEST(MscclMalformed, AlgoAttributes) {
  expectRefused(replaced(validXml(), "proto=\"Simple\"", "proto=\"Fast\""),
                {"t.xml:2:", "<algo name=\"pairs2\">", "proto \"Fast\""});
  expectRefused(replaced(validXml(), "coll=\"allreduce\"", "coll=\"alltoallv\""),
                {"collective \"alltoallv\" is not supported"});
  expectRefused(replaced(validXml(), "outofplace=\"1\"", "outofplace=\"0\""),
                {"could never be used"});
  expectRefused(replaced(validXml(), "maxBytes=\"0\"", "maxBytes=\"-5\""), {"maxBytes=-5"});
  expectRefused(replaced(validXml(), "nchunksperloop=\"2\"", "nchunksperloop=\"0\""),
                {"nchunksperloop=0 is outside"});
}

TEST(MscclMalformed, MissingOrNonNumericAttribute) {
  expectRefused(
      replaced(validXml(), " cnt=\"1\"", ""),
      {"t.xml:5:", "<gpu id=\"0\"> <tb id=\"0\"> <step s=\"0\">", "missing attribute cnt"});
  expectRefused(replaced(validXml(), "srcoff=\"1\"", "srcoff=\"1x\""),
                {"<step s=\"0\">", "srcoff=\"1x\" is not an integer"});
  expectRefused(replaced(validXml(), "chan=\"0\"", "chan=\"\""), {"<tb id=\"0\">", "chan=\"\""});
}

TEST(MscclMalformed, NgpusMismatch) {
  expectRefused(replaced(validXml(), "ngpus=\"2\"", "ngpus=\"3\""),
                {"<algo", "ngpus is 3 but there are 2 <gpu> elements (gpu id 2 is missing)"});
  expectRefused(replaced(validXml(), "ngpus=\"2\"", "ngpus=\"1\""),
                {"<gpu id=\"0\"> <tb id=\"0\">", "send=1 is outside [-1, 0]"});
}

TEST(MscclMalformed, DuplicateOrNonDenseIds) {
  expectRefused(replaced(validXml(), "<gpu id=\"1\"", "<gpu id=\"0\""),
                {"<gpu id=\"0\">", "duplicate gpu id 0 (first at line 3)"});
  expectRefused(replaced(validXml(), "<tb id=\"1\"", "<tb id=\"0\""),
                {"<tb id=\"0\">", "duplicate tb id 0 (first at line 4)"});
  expectRefused(replaced(validXml(), "<tb id=\"1\"", "<tb id=\"2\""),
                {"<gpu id=\"0\">", "tb 1 is missing"});
  expectRefused(replaced(validXml(), "<tb id=\"1\"", "<tb id=\"-1\""), {"id=-1 is outside"});
  expectRefused(replaced(validXml(), "<step s=\"1\"", "<step s=\"2\""),
                {"<step s=\"2\">", "out of order (expected s=1)"});
}

TEST(MscclMalformed, UnknownStepTypeOrBuffer) {
  expectRefused(replaced(validXml(), "type=\"rrc\"", "type=\"rrx\""),
                {"t.xml:6:", "<step s=\"1\">", "unknown step type \"rrx\""});
  expectRefused(replaced(validXml(), "dstbuf=\"s\"", "dstbuf=\"scratch\""),
                {"<tb id=\"1\"> <step s=\"0\">", "dstbuf=\"scratch\" is not a buffer"});
  expectRefused(replaced(validXml(), "<step s=\"0\"", "<stop s=\"0\""),
                {"<tb id=\"0\"> <stop>", "unexpected element"});
}

TEST(MscclMalformed, PeersOutOfRangeOrSelf) {
  expectRefused(replaced(validXml(), "send=\"1\"", "send=\"2\""),
                {"<gpu id=\"0\"> <tb id=\"0\">", "send=2 is outside [-1, 1]"});
  expectRefused(replaced(validXml(), "recv=\"1\"", "recv=\"0\""),
                {"<tb id=\"0\">", "cannot send to or receive from itself"});
}

TEST(MscclMalformed, TransferOnTbWithoutPeer) {
  expectRefused(replaced(validXml(), "type=\"cpy\"", "type=\"rcs\""),
                {"<tb id=\"1\"> <step s=\"0\">", "type rcs sends but the tb has no send peer"});
  expectRefused(replaced(validXml(), "type=\"cpy\"", "type=\"r\""),
                {"<tb id=\"1\"> <step s=\"0\">", "has no receive peer"});
}

TEST(MscclMalformed, OperandOutOfBounds) {
  expectRefused(
      replaced(validXml(), "dstbuf=\"s\" dstoff=\"0\" cnt=\"1\"",
               "dstbuf=\"s\" dstoff=\"0\" cnt=\"2\""),
      {"<tb id=\"1\"> <step s=\"0\">", "dst chunks [0, 2) are outside buffer s of 1 chunks"});
  expectRefused(replaced(validXml(), "srcoff=\"1\"", "srcoff=\"-1\""),
                {"<step s=\"0\">", "srcoff=-1 on a step that uses its src"});
  expectRefused(replaced(validXml(), "i_chunks=\"2\"", "i_chunks=\"99\""), {"i_chunks=99"});
}

TEST(MscclMalformed, DanglingDependency) {
  expectRefused(replaced(validXml(), "depid=\"0\" deps=\"1\"", "depid=\"2\" deps=\"1\""),
                {"t.xml:11:", "<tb id=\"1\"> <step s=\"0\">",
                 "depends on tb 2 step 1, which does not exist"});
  expectRefused(replaced(validXml(), "depid=\"0\" deps=\"1\"", "depid=\"0\" deps=\"4\""),
                {"depends on tb 0 step 4"});
  expectRefused(replaced(validXml(), "depid=\"0\" deps=\"1\"", "depid=\"0\" deps=\"-1\""),
                {"needs a step index"});
}

TEST(MscclMalformed, DependencyCycle) {
  // tb 0's first send waits for tb 1's copy, which waits for tb 0's second step.
  std::string x = replaced(validXml(), "cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"",
                           "cnt=\"1\" depid=\"1\" deps=\"0\" hasdep=\"0\"");
  expectRefused(x, {"<gpu id=\"0\"> <tb id=\"0\">", "dependency cycle"});
  // A step waiting for itself.
  expectRefused(replaced(validXml(), "depid=\"0\" deps=\"1\"", "depid=\"1\" deps=\"0\""),
                {"<tb id=\"1\">", "dependency cycle"});
}

TEST(MscclMalformed, HasdepOutOfRange) {
  expectRefused(replaced(validXml(), "hasdep=\"1\"", "hasdep=\"2\""),
                {"hasdep=2 is outside [0, 1]"});
}

TEST(MscclMalformed, Limits) {
  MscclLimits small;
  small.maxBytes = 100;
  EXPECT_THROW(importMsccl(validXml(), "t.xml", small), Error);
  try {
    importMsccl(validXml(), "t.xml", small);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-byte limit"), std::string::npos);
  }
  small = MscclLimits{};
  small.maxElements = 5;
  try {
    importMsccl(validXml(), "t.xml", small);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 5 elements"), std::string::npos) << e.what();
  }
  small = MscclLimits{};
  small.maxStepsPerLane = 2;
  EXPECT_THROW(importMsccl(validXml(), "t.xml", small), Error);
  expectRefused(replaced(validXml(), "ngpus=\"2\"", "ngpus=\"100000\""),
                {"ngpus=100000 is outside"});
}

}  // namespace
}  // namespace weft::plan
