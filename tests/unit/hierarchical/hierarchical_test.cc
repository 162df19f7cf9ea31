// Hierarchical plans over many host layouts (even, uneven, interleaved ranks, single-rank hosts)
// must pass the symbolic verifier; the selector offers them only across hosts.
#include "algorithms/hierarchical/hierarchical.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/plan/verifier.h"
#include "src/select/selector.h"

namespace weft::algo {
namespace {

using plan::Collective;

std::string show(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += std::to_string(x) + ",";
  return s;
}

TEST(HostLayout, GroupsByLabelInRankOrder) {
  HostLayout hl = hostLayout(6, {7, 3, 7, 3, 9, 7});
  ASSERT_EQ(hl.members.size(), 3u);
  EXPECT_EQ(hl.members[0], (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(hl.members[1], (std::vector<int>{1, 3}));
  EXPECT_EQ(hl.members[2], (std::vector<int>{4}));
  EXPECT_EQ(hl.local[5], 2);
  EXPECT_EQ(hl.host[4], 2);
  EXPECT_EQ(hl.maxLocal(), 3);
  EXPECT_EQ(hostLayout(3, {}).members.size(), 1u);  // no labels: one host
}

TEST(Hierarchical, VerifiesOnManyLayouts) {
  const std::vector<std::vector<int>> layouts = {{0, 1},
                                                 {0, 0, 1, 1},
                                                 {0, 0, 0, 1},
                                                 {0, 1, 0, 1},
                                                 {0, 1, 2, 0, 1, 2},
                                                 {0, 1, 1, 2, 2, 2},
                                                 {0, 1, 2, 3, 4},
                                                 {0, 0, 1, 1, 2, 2, 3, 3},
                                                 {5, 5, 5, 2},
                                                 {0, 0, 0}};
  int checked = 0;
  for (const auto& hosts : layouts)
    for (Collective c :
         {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter})
      for (uint64_t count : {1ull, 7ull, 100ull, 1000ull})
        for (uint32_t elemSize : {2u, 4u})
          for (uint64_t slice : {0ull, 16ull}) {
            plan::Spec s;
            s.coll = c;
            s.nranks = static_cast<int>(hosts.size());
            s.count = count;
            s.elemSize = elemSize;
            Options o;
            o.hostOf = hosts;
            o.sliceElems = slice;
            plan::Plan p = build("hier", s, o);
            for (int slots : {2, 4}) {
              plan::VerifyOptions v;
              v.sliceElems = slice;
              v.fifoSlots = slots;
              std::string m = plan::verifyMessage(p, v);
              ASSERT_EQ(m, "") << plan::collectiveName(c) << " hosts " << show(hosts) << " count "
                               << count << " elem " << elemSize << " slice " << slice << " slots "
                               << slots;
              ++checked;
            }
          }
  EXPECT_GT(checked, 400);
}

TEST(Hierarchical, NetworkCarriesOnlyTheLeadersRing) {
  // 2 hosts x 3 ranks: only the two leaders exchange data across hosts.
  plan::Spec s;
  s.coll = Collective::kAllReduce;
  s.nranks = 6;
  s.count = 4096;
  Options o;
  o.hostOf = {0, 0, 0, 1, 1, 1};
  plan::Plan p = build("hier", s, o);
  auto host = [](int r) { return r / 3; };
  for (int r = 0; r < 6; ++r)
    for (const auto& lane : p.programs[r].lanes)
      for (const auto& st : lane.steps) {
        if (plan::opSends(st.op) && host(st.sendPeer) != host(r)) {
          EXPECT_TRUE(r == 0 || r == 3) << "rank " << r << " sends across hosts";
        }
        if (plan::opRecvs(st.op) && host(st.recvPeer) != host(r)) {
          EXPECT_TRUE(r == 0 || r == 3) << "rank " << r << " receives across hosts";
        }
      }
}

TEST(Selector, HierarchicalOnlyAcrossHosts) {
  plan::Spec s;
  s.coll = Collective::kAllReduce;
  s.nranks = 4;
  s.count = 4 << 20;
  select::Selector one(4, select::LinkModel{}, select::AlgoFilter(""));
  EXPECT_NE(one.choose(s).algorithm, "hier");
  select::Selector two(4, select::LinkModel{}, select::AlgoFilter(""));
  select::LinkModel net;
  net.alphaUs = 30;
  net.betaUsPerByte = 1.0 / 125.0;  // 1 Gbit/s
  two.setHosts({0, 0, 1, 1}, net);
  select::Choice c = two.choose(s);
  EXPECT_EQ(c.algorithm, "hier");
  EXPECT_EQ(c.options.hostOf, (std::vector<int>{0, 0, 1, 1}));
  s.coll = Collective::kAllGather;
  s.count = 1 << 20;
  EXPECT_EQ(two.choose(s).algorithm, "hier");
  // One rank per host: nothing to gain inside hosts.
  select::Selector flat(2, select::LinkModel{}, select::AlgoFilter(""));
  flat.setHosts({0, 1}, net);
  s.coll = Collective::kAllReduce;
  s.nranks = 2;
  EXPECT_NE(flat.choose(s).algorithm, "");
  // NCCL_ALGO still rules.
  select::Selector forced(4, select::LinkModel{}, select::AlgoFilter("ring"));
  forced.setHosts({0, 0, 1, 1}, net);
  s.nranks = 4;
  EXPECT_EQ(forced.choose(s).algorithm, "ring");
}

}  // namespace
}  // namespace weft::algo
