// Zero copy on real verbs: messages sent by reference from registered user memory, landings (the
// receiver's offered destination written in place), ncclCommRegister's registrations held in
// the protection domain's cache, and hostile landing offers that must fail the connection
// without a write outside what was offered. Runs where WEFT_TEST_IB is set (tests/vm, soft-RoCE).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/conformance/pair_harness.h"
#include "tests/ib/ib_pair_fixture.h"
#include "transports/ib/connection.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;

class IbLanding : public IbPairTest {};

// One message each way, so both ends are set up.
void exchange(TransportPair::Conn& a, TransportPair::Conn& b) {
  for (auto [tx, rx] : {std::pair{a.get(), b.get()}, std::pair{b.get(), a.get()}}) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    void* slot = nullptr;
    while (!(slot = tx->sendSlot())) ASSERT_LT(Clock::now(), deadline);
    tx->post(0, 1);
    uint32_t bytes = 0, tag = 0;
    while (!rx->recvSlot(&bytes, &tag)) ASSERT_LT(Clock::now(), deadline);
    rx->release();
  }
}

const void* awaitMessage(transport::Connection& c, uint32_t* bytes, uint32_t* tag) {
  auto deadline = Clock::now() + std::chrono::seconds(30);
  std::string why;
  for (;;) {
    if (const void* p = c.recvSlot(bytes, tag)) return p;
    if (c.health(&why) != Status::kSuccess) ADD_FAILURE() << why;
    if (Clock::now() > deadline || !why.empty()) return nullptr;
    std::this_thread::yield();
  }
}

std::string awaitFailure(transport::Connection& c, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  std::string why;
  while (Clock::now() < deadline) {
    if (c.health(&why) != Status::kSuccess) return why;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

// Rank 1 offers a buffer; rank 0 sends four messages of the offer's tag by reference from a
// registered buffer, then one of another tag. The four land in place (recvSlot hands out their
// place in the buffer), the fifth arrives in a slot.
TEST_F(IbLanding, ReferencesLandInTheOfferedBuffer) {
  auto c = pair_->connect(0);
  exchange(c.first, c.second);
  const size_t piece = pair_->slotBytes();
  std::vector<uint8_t> src(4 * piece), dst(4 * piece, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  int comm = 0;
  std::string why;
  ASSERT_TRUE(ib(c.first).registerMemory(&comm, src.data(), src.size(), &why)) << why;
  // Both ranks are of this process, so the cache holds the offered buffer too while it is walked.
  ib::MrCache& cache = ib(c.first).mrCacheForTesting();
  const size_t before = cache.validRegions();
  ASSERT_TRUE(c.second->peerMemory()->offerLanding(dst.data(), dst.size(), 7));
  EXPECT_EQ(cache.validRegions(), before + 1) << "the offered buffer is registered";
  const size_t regions = cache.validRegions();
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!ib(c.first).peerOfferActiveForTesting()) ASSERT_LT(Clock::now(), deadline);
  transport::ReferenceSends* refs = c.first->referenceSends();
  ASSERT_NE(refs, nullptr);
  for (int m = 0; m < 5; ++m) {
    while (!c.first->sendSlot()) ASSERT_LT(Clock::now(), deadline);
    if (m < 4)
      refs->postReference(src.data() + m * piece, static_cast<uint32_t>(piece), 7);
    else
      refs->postReference(src.data(), 100, 8);
  }
  EXPECT_EQ(cache.validRegions(), regions) << "the registered buffer was a hit";
  for (int m = 0; m < 5; ++m) {
    uint32_t bytes = 0, tag = 0;
    const auto* p = static_cast<const uint8_t*>(awaitMessage(*c.second, &bytes, &tag));
    ASSERT_NE(p, nullptr) << "message " << m;
    if (m < 4) {
      EXPECT_EQ(p, dst.data() + m * piece) << "message " << m << " did not land in place";
      EXPECT_EQ(tag, 7u);
      EXPECT_EQ(bytes, piece);
      EXPECT_EQ(std::memcmp(p, src.data() + m * piece, piece), 0) << "message " << m;
    } else {
      EXPECT_TRUE(p < dst.data() || p >= dst.data() + dst.size()) << "landed past the offer";
      EXPECT_EQ(tag, 8u);
      EXPECT_EQ(std::memcmp(p, src.data(), 100), 0);
    }
    c.second->release();
  }
  deadline = Clock::now() + std::chrono::seconds(20);
  while (!refs->consumed(refs->postedCount())) ASSERT_LT(Clock::now(), deadline);
  EXPECT_EQ(cache.validRegions(), before) << "the walked offer's region is released";
  ib(c.first).deregisterMemory(&comm, src.data(), src.size());
  EXPECT_EQ(cache.validRegions(), before - 1) << "ncclCommDeregister invalidates the region";
}

// Messages sent before the offer reached the sender travel in slots; the offer's walk passes
// over them on both sides, and the rest land.
TEST_F(IbLanding, MessagesAheadOfTheOfferGoThroughSlots) {
  auto c = pair_->connect(1);
  exchange(c.first, c.second);
  const size_t piece = 4096;
  std::vector<uint8_t> dst(6 * piece, 0);
  for (int m = 0; m < 2; ++m) {  // sent before the offer exists
    void* slot = c.first->sendSlot();
    ASSERT_NE(slot, nullptr);
    std::memset(slot, 0x30 + m, piece);
    c.first->post(piece, 3);
  }
  ASSERT_TRUE(c.second->peerMemory()->offerLanding(dst.data(), dst.size(), 3));
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!ib(c.first).peerOfferActiveForTesting()) ASSERT_LT(Clock::now(), deadline);
  for (int m = 2; m < 6; ++m) {
    void* slot = nullptr;
    while (!(slot = c.first->sendSlot())) ASSERT_LT(Clock::now(), deadline);
    std::memset(slot, 0x30 + m, piece);
    c.first->post(piece, 3);
  }
  for (int m = 0; m < 6; ++m) {
    uint32_t bytes = 0, tag = 0;
    const auto* p = static_cast<const uint8_t*>(awaitMessage(*c.second, &bytes, &tag));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p[piece - 1], 0x30 + m);
    if (m >= 2) {
      EXPECT_EQ(p, dst.data() + m * piece) << "message " << m;
    }
    c.second->release();
  }
}

TEST_F(IbLanding, HostileOffersFailTheConnection) {
  struct Case {
    const char* expect;
    void (*forge)(ib::LandingOffer*, uint32_t* entry);
  };
  const Case cases[] = {
      {"invalid range", [](ib::LandingOffer* o, uint32_t*) { o->addr = 0; }},
      {"invalid range", [](ib::LandingOffer* o, uint32_t*) { o->addr = UINT64_MAX - 64; }},
      {"wrong mailbox entry", [](ib::LandingOffer*, uint32_t* e) { *e += 1; }},
      {"for message",
       [](ib::LandingOffer* o, uint32_t* e) {
         o->startSeq += 16;  // a message never sent, in its own entry
         *e = static_cast<uint32_t>(o->startSeq % 16);
       }},
  };
  int channel = 2;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.expect);
    auto c = pair_->connect(channel++);
    exchange(c.first, c.second);
    std::vector<uint8_t> dst(8192);
    ib::LandingOffer o;
    o.startSeq = 1;  // one message was received
    o.addr = reinterpret_cast<uint64_t>(dst.data());
    o.bytes = dst.size();
    o.tag = 4;
    uint32_t entry = 1;
    k.forge(&o, &entry);
    ib(c.second).postOfferForTesting(o, entry);
    const std::string why = awaitFailure(*c.first, std::chrono::seconds(10));
    EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
    EXPECT_NE(why.find(k.expect), std::string::npos) << why;
  }
}

// An offer whose key the receiver never issued: the sender checks the range, the HCA the key.
TEST_F(IbLanding, ForgedOfferKeyIsRefusedByTheHca) {
  auto c = pair_->connect(6);
  exchange(c.first, c.second);
  std::vector<uint8_t> dst(1 << 16);
  ib::LandingOffer o;
  o.startSeq = 1;
  o.addr = reinterpret_cast<uint64_t>(dst.data());
  o.bytes = dst.size();
  o.tag = 4;
  o.rkey = 0x00ff00ff;
  ib(c.second).postOfferForTesting(o, 1);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!ib(c.first).peerOfferActiveForTesting()) ASSERT_LT(Clock::now(), deadline);
  void* slot = c.first->sendSlot();
  ASSERT_NE(slot, nullptr);
  std::memset(slot, 0xee, 4096);
  c.first->post(4096, 4);
  const std::string why = awaitFailure(*c.first, std::chrono::seconds(20));
  EXPECT_NE(why.find("completion error"), std::string::npos) << why;
  EXPECT_EQ(dst[0], 0) << "the forged key wrote";
}

}  // namespace
}  // namespace weft::test
