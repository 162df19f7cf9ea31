// The checks an ib connection makes on what its peer sends (transports/ib/wire.h): no device
// needed.
#include "transports/ib/wire.h"

#include <gtest/gtest.h>

namespace weft::ib {
namespace {

QpInfo goodInfo() {
  QpInfo i;
  i.magic = kInfoMagic;
  i.qps = 2;
  i.qpn[0] = 17;
  i.qpn[1] = 18;
  i.psn = 0x123456;
  i.slots = 8;
  i.slotBytes = 128 << 10;
  i.recvAddr = 0x7f0000001000;
  i.recvKey = 0x1234;
  i.ethernet = 1;
  i.mtu = 3;
  i.gid[10] = 0xff;
  i.gid[11] = 0xff;
  i.gid[15] = 1;
  return i;
}

const LocalShape kShape{2, 8, 128 << 10, true};

TEST(PeerInfo, AcceptsAWellFormedMessage) { EXPECT_EQ(checkPeerInfo(goodInfo(), kShape), ""); }

TEST(PeerInfo, RejectsEachBadField) {
  struct Case {
    const char* expect;
    void (*mutate)(QpInfo*);
  };
  const Case cases[] = {
      {"malformed", [](QpInfo* i) { i->magic ^= 1; }},
      {"queue pairs per connection", [](QpInfo* i) { i->qps = 3; }},
      {"invalid queue pair number", [](QpInfo* i) { i->qpn[1] = 0; }},
      {"invalid queue pair number", [](QpInfo* i) { i->qpn[0] = 1u << 24; }},
      {"packet sequence number", [](QpInfo* i) { i->psn = 1u << 24; }},
      {"uses a FIFO of 9", [](QpInfo* i) { i->slots = 9; }},
      {"uses a FIFO of 8 x 1", [](QpInfo* i) { i->slotBytes = 1; }},
      {"link layer", [](QpInfo* i) { i->ethernet = 0; }},
      {"path MTU", [](QpInfo* i) { i->mtu = 0; }},
      {"path MTU", [](QpInfo* i) { i->mtu = 6; }},
      {"receive FIFO address", [](QpInfo* i) { i->recvAddr = 0; }},
      {"receive FIFO address", [](QpInfo* i) { i->recvAddr = UINT64_MAX - 4096; }},
      {"without a GID", [](QpInfo* i) { std::fill(i->gid, i->gid + 16, 0); }},
  };
  for (const Case& c : cases) {
    QpInfo i = goodInfo();
    c.mutate(&i);
    const std::string why = checkPeerInfo(i, kShape);
    EXPECT_NE(why.find(c.expect), std::string::npos)
        << "expected '" << c.expect << "', got '" << why << "'";
  }
}

TEST(PeerInfo, InfiniBandNeedsALid) {
  QpInfo i = goodInfo();
  i.ethernet = 0;
  const LocalShape ib{2, 8, 128 << 10, false};
  EXPECT_NE(checkPeerInfo(i, ib).find("LID"), std::string::npos);
  i.lid = 5;
  EXPECT_EQ(checkPeerInfo(i, ib), "");
}

TEST(Immediate, DataRoundTripsAndBadOnesAreRefused) {
  DataImmediate d;
  std::string why;
  ASSERT_TRUE(decodeDataImmediate(dataImmediate(7, 3), 8, 3, &d, &why)) << why;
  EXPECT_EQ(d.slot, 7u);
  EXPECT_EQ(d.parts, 3u);
  EXPECT_FALSE(decodeDataImmediate(dataImmediate(8, 1), 8, 3, &d, &why));  // no such slot
  EXPECT_FALSE(decodeDataImmediate(dataImmediate(0, 0), 8, 3, &d, &why));  // no parts
  EXPECT_FALSE(decodeDataImmediate(dataImmediate(0, 4), 8, 3, &d, &why));  // more than qps
  EXPECT_FALSE(decodeDataImmediate(kCreditBit | 5, 8, 3, &d, &why));       // a credit
  EXPECT_NE(why.find("credit"), std::string::npos);
}

TEST(Immediate, LandedFlagAndOffersStayApart) {
  DataImmediate d;
  std::string why;
  ASSERT_TRUE(decodeDataImmediate(dataImmediate(3, 16, true), 8, 16, &d, &why)) << why;
  EXPECT_TRUE(d.landed);
  EXPECT_EQ(d.parts, 16u);
  ASSERT_TRUE(decodeDataImmediate(dataImmediate(3, 2, false), 8, 16, &d, &why));
  EXPECT_FALSE(d.landed);
  // An offer's immediate is never data.
  EXPECT_FALSE(decodeDataImmediate(kCreditBit | kOfferBit | 3, 8, 16, &d, &why));
}

LandingOffer goodOffer() {
  LandingOffer o;
  o.startSeq = 21;
  o.addr = 0x7f1000000000;
  o.bytes = 1 << 20;
  o.tag = 9;
  o.rkey = 0x42;
  return o;
}

TEST(LandingOffer, AcceptedOnlyForAPlaceableMessageAndRange) {
  const LandingOffer o = goodOffer();
  const uint32_t entry = 21 % mailboxEntries(8);
  EXPECT_EQ(checkLandingOffer(o, entry, 8, 18, 24), "");
  EXPECT_EQ(checkLandingOffer(o, entry, 8, 21, 21), "");  // nothing sent since
  EXPECT_NE(checkLandingOffer(o, entry + 1, 8, 18, 24), "");
  EXPECT_NE(checkLandingOffer(o, entry, 8, 22, 24), "");  // before a credit already seen
  EXPECT_NE(checkLandingOffer(o, entry, 8, 18, 20), "");  // a message never sent
  LandingOffer bad = o;
  bad.addr = 0;
  EXPECT_NE(checkLandingOffer(bad, entry, 8, 18, 24), "");
  bad = o;
  bad.addr = UINT64_MAX - 4096;
  EXPECT_NE(checkLandingOffer(bad, entry, 8, 18, 24), "");
  bad = o;
  bad.bytes = 0;
  EXPECT_NE(checkLandingOffer(bad, entry, 8, 18, 24), "");
  bad.bytes = kMaxLandingBytes + 1;
  EXPECT_NE(checkLandingOffer(bad, entry, 8, 18, 24), "");
}

TEST(LandingOffer, WalkTakesMatchingMessagesThatFit) {
  const LandingOffer o = goodOffer();
  EXPECT_TRUE(offerTakes(o, 0, 9, 1 << 20));
  EXPECT_FALSE(offerTakes(o, 0, 8, 1));              // another operation
  EXPECT_FALSE(offerTakes(o, 1, 9, 1 << 20));        // past the end
  EXPECT_FALSE(offerTakes(o, (1 << 20) + 1, 9, 0));  // a walk past the end takes nothing
  uint64_t remote = 0;
  ASSERT_TRUE(landingTarget(o, 4096, 8192, &remote));
  EXPECT_EQ(remote, o.addr + 4096);
  EXPECT_FALSE(landingTarget(o, (1 << 20) - 10, 11, &remote));
  EXPECT_FALSE(landingTarget(o, UINT64_MAX, 2, &remote));
}

TEST(PartRange, PartsTileTheSlot) {
  const uint64_t slotBytes = 100000, total = kHeaderBytes + slotBytes;
  for (uint32_t parts = 1; parts <= kMaxQps; ++parts) {
    uint64_t next = 5 * (kHeaderBytes + slotBytes);
    for (uint32_t p = 0; p < parts; ++p) {
      uint64_t offset = 0, length = 0;
      partRange(5, slotBytes, total, p, parts, &offset, &length);
      EXPECT_EQ(offset, next);
      next = offset + length;
    }
    EXPECT_EQ(next, 6 * (kHeaderBytes + slotBytes));
  }
}

TEST(ControlBytes, OnlyTheThreeKnownOnes) {
  EXPECT_EQ(controlByte(kReady), kReady);
  EXPECT_EQ(controlByte(kPoisoned), kPoisoned);
  EXPECT_EQ(controlByte(kGoodbye), kGoodbye);
  EXPECT_EQ(controlByte('Z'), 0);
  EXPECT_EQ(controlByte(0), 0);
}

}  // namespace
}  // namespace weft::ib
