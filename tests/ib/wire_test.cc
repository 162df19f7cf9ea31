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
