// Pins every built-in algorithm's Plan, byte for byte, over a grid of calls: every algorithm x
// every collective it registers x nranks 1..9 and 16 x counts 0, 1, 7, 1000, 65537 x roots 0 and
// n - 1 (rooted collectives) x two option sets, plus hier over the host layouts of the
// hierarchical and selector tests. Generators do not know whether a call is in place (a Spec has
// no such field), so in/out of place is no axis here; the plan's inPlaceSafe is in the rendering.
//
// tests/unit/algorithms/plan_hashes.golden holds one 64-bit hash of each plan's rendering per case
// line. It was generated before the algorithms' shared parts moved to algorithms/common, from the
// code of that time, and may change only with a reason (a generator that is meant to build a
// different plan). WEFT_PLAN_WRITE_GOLDEN=<path> writes the current hashes to <path> (the test is
// then skipped).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/plan/plan.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

// Option sets: the defaults, and one with empty channel parts for small counts, short slices (so
// large counts pipeline), 2-byte elements (other alignment) and a fan push share of its own.
struct OptionSet {
  const char* name;
  Options options;
  uint32_t elemSize;
};

std::vector<OptionSet> optionSets() {
  Options small;
  small.channels = 3;
  small.sliceElems = 96;
  small.pushShare = 0.5;
  return {{"defaults", Options{}, 4}, {"small", small, 2}};
}

// plan::toText plus the fields it leaves out (element size, in/out-of-place safety, pieces, extra
// buffer sizes, lane shares, and the operands of steps whose op does not use them).
std::string render(const Plan& p) {
  std::ostringstream out;
  out << plan::toText(p);
  out << "elemSize=" << p.spec.elemSize << " inPlaceSafe=" << p.inPlaceSafe
      << " outOfPlaceSafe=" << p.outOfPlaceSafe << " pieces=" << p.pieces << "\n";
  for (size_t r = 0; r < p.programs.size(); ++r) {
    out << "rank " << r << " extra=";
    for (uint64_t e : p.programs[r].extraElems) out << e << ",";
    out << "\n";
    for (const plan::Lane& lane : p.programs[r].lanes) {
      out << " share=" << lane.share << "\n";
      for (const plan::Step& s : lane.steps)
        out << "  " << s.src.buffer << ":" << s.src.offset << " " << s.dst.buffer << ":"
            << s.dst.offset << "\n";
    }
  }
  return out.str();
}

// FNV-1a, 64 bits.
uint64_t hash64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// " hosts=<label of each rank>", or nothing without a layout.
std::string hostsName(const std::vector<int>& hostOf) {
  if (hostOf.empty()) return "";
  std::string s = " hosts=";
  for (int h : hostOf) s += std::to_string(h);
  return s;
}

// "<algorithm> <collective> n=<nranks> root=<root> count=<count> <option set>[ hosts=<labels>]
// <hash>", one line per case, in a fixed order.
std::vector<std::string> hashLines() {
  const std::vector<uint64_t> counts = {0, 1, 7, 1000, 65537};
  std::vector<int> rankCounts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
  // The layouts of tests/unit/hierarchical and tests/unit/select/choice_table_test.cc.
  const std::vector<std::vector<int>> layouts = {{0, 1},
                                                 {0, 0, 1, 1},
                                                 {0, 0, 0, 1},
                                                 {0, 1, 0, 1},
                                                 {0, 1, 2, 0, 1, 2},
                                                 {0, 1, 1, 2, 2, 2},
                                                 {0, 1, 2, 3, 4},
                                                 {0, 0, 1, 1, 2, 2, 3, 3},
                                                 {5, 5, 5, 2},
                                                 {0, 0, 0},
                                                 {0, 0, 0, 0, 1, 1, 1, 1},
                                                 {0, 0, 1, 1, 1},
                                                 {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                                 {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}};
  std::vector<std::string> lines;
  auto add = [&](const Algorithm& a, Collective c, int n, int root, uint64_t count,
                 const OptionSet& set, const std::vector<int>& hostOf) {
    plan::Spec s;
    s.coll = c;
    s.nranks = n;
    s.root = root;
    s.count = count;
    s.elemSize = set.elemSize;
    Options o = set.options;
    o.hostOf = hostOf;
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx",
                  static_cast<unsigned long long>(hash64(render(build(a.name, s, o)))));
    lines.push_back(std::string(a.name) + " " + plan::collectiveName(c) +
                    " n=" + std::to_string(n) + " root=" + std::to_string(root) + " count=" +
                    std::to_string(count) + " " + set.name + hostsName(hostOf) + " " + hash);
  };
  for (const Algorithm& a : all())
    for (Collective c : a.colls)
      for (const OptionSet& set : optionSets()) {
        for (int n : rankCounts)
          for (uint64_t count : counts) {
            add(a, c, n, 0, count, set, {});
            if (rooted(c) && n > 1) add(a, c, n, n - 1, count, set, {});
          }
        if (std::string(a.name) != "hier") continue;
        for (const auto& hostOf : layouts)
          for (uint64_t count : counts)
            add(a, c, static_cast<int>(hostOf.size()), 0, count, set, hostOf);
      }
  return lines;
}

TEST(AlgorithmPlans, MatchTheGoldenHashes) {
  const std::vector<std::string> now = hashLines();
  if (const char* out = std::getenv("WEFT_PLAN_WRITE_GOLDEN")) {
    std::ofstream file(out);
    for (const auto& l : now) file << l << "\n";
    GTEST_SKIP() << "wrote " << now.size() << " lines to " << out;
  }
  std::ifstream file(WEFT_SOURCE_DIR "/tests/unit/algorithms/plan_hashes.golden");
  ASSERT_TRUE(file) << "missing tests/unit/algorithms/plan_hashes.golden";
  std::vector<std::string> golden;
  for (std::string l; std::getline(file, l);) golden.push_back(l);
  ASSERT_EQ(golden.size(), now.size()) << "the grid changed";
  int differ = 0;
  for (size_t i = 0; i < now.size(); ++i)
    if (now[i] != golden[i] && ++differ <= 20)
      ADD_FAILURE() << "plan changed\n  was: " << golden[i] << "\n  now: " << now[i];
  EXPECT_EQ(differ, 0) << "cases whose plans changed";
}

// The hashes see the whole plan: changing any one field of a step, lane or program changes it.
TEST(AlgorithmPlans, RenderingCoversEveryField) {
  plan::Spec s;
  s.coll = Collective::kAllReduce;
  s.nranks = 3;
  s.count = 100;
  const Plan good = build("ring", s, {});
  const uint64_t base = hash64(render(good));
  std::vector<void (*)(Plan&)> mutations = {
      [](Plan& p) { p.spec.elemSize = 8; },
      [](Plan& p) { p.inPlaceSafe = !p.inPlaceSafe; },
      [](Plan& p) { p.outOfPlaceSafe = !p.outOfPlaceSafe; },
      [](Plan& p) { p.pieces = 2; },
      [](Plan& p) { p.programs[1].scratchElems += 1; },
      [](Plan& p) { p.programs[1].extraElems.push_back(0); },
      [](Plan& p) { p.programs[1].lanes[0].channel += 1; },
      [](Plan& p) { p.programs[1].lanes[0].share += 1; },
      [](Plan& p) { p.programs[1].lanes[0].sendChannel = 5; },
      [](Plan& p) { p.programs[1].lanes[0].push = true; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].op = plan::Op::kNop; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].sendPeer = 0; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].recvPeer = 2; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].src.buffer = plan::kScratch; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].src.offset += 1; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].dst.buffer = plan::kScratch; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].dst.offset += 1; },
      [](Plan& p) { p.programs[1].lanes[0].steps[0].count += 1; },
      [](Plan& p) {
        p.programs[1].lanes[0].steps[1].deps.push_back({0, 0});
      },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    Plan bad = good;
    mutations[i](bad);
    EXPECT_NE(hash64(render(bad)), base) << "mutation " << i;
  }
}

}  // namespace
}  // namespace weft::algo
