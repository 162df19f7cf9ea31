// Landing: a receiver offers where its next messages go, and the sender stores them there and
// publishes only descriptors. Over the in-process link (plain addresses) and over shm (a
// writable mapping of the receiver's memfd region), every byte must end up where the receiver
// expects it, messages sent before the offer must count towards it, a filled offer must not
// take more, and a destination the sender cannot reach must not be offered.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/conformance/memfd_region.h"
#include "tests/conformance/pair_harness.h"
#include "transports/base/capabilities.h"
#include "transports/shm/fifo.h"

namespace weft::test {
namespace {

// The operation's tag, as the executor passes its lane's: offer and landing must agree.
constexpr uint32_t kTag = 0x5eed;

uint8_t pattern(uint64_t i, int salt) { return static_cast<uint8_t>(i * 13 + (i >> 11) + salt); }

void fill(char* p, size_t bytes, uint64_t from, int salt) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(pattern(from + i, salt));
}

// Receives one message, checks its tag, size and that it is addressable; returns its data.
const char* receive(transport::Connection& rx, uint32_t wantTag, uint32_t wantBytes) {
  uint32_t bytes = 0, tag = 0;
  uint64_t remote = 0;
  bool present = false;
  const void* in = rx.recvMessage(&bytes, &tag, &remote, &present);
  EXPECT_TRUE(present) << "message " << wantTag << " did not arrive";
  EXPECT_EQ(tag, wantTag);
  EXPECT_EQ(bytes, wantBytes);
  return static_cast<const char*>(in);
}

class Landing : public ::testing::TestWithParam<const char*> {};

TEST_P(Landing, MessagesLandInOrderAfterThoseSentBeforeTheOffer) {
  TransportPair pair(GetParam());
  auto c = pair.connect(0);
  transport::Connection& tx = *c.first;
  transport::Connection& rx = *c.second;
  const uint32_t first = 4096;  // through a slot, before the offer
  const std::vector<uint32_t> landed = {64u << 10, (64u << 10) + 40, 100003};
  uint64_t total = first;
  for (uint32_t b : landed) total += b;
  MemfdRegion dst(total + 8192);
  char* out = dst.data() + 64;  // the offer need not start a page
  std::memset(dst.data(), 0, total + 8192);

  std::vector<char> msg(first);
  fill(msg.data(), first, 0, 1);
  void* slot = tx.sendSlotFor(first);
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, msg.data(), first);
  tx.post(first, 0);

  ASSERT_TRUE(rx.peerMemory()->offerLanding(out, total, kTag));
  uint64_t at = first;
  for (size_t m = 0; m < landed.size(); ++m) {
    // Over shm the sender writes through its own mapping of the region: where the bytes land
    // is checked at the end, in the receiver's memory.
    char* place = static_cast<char*>(tx.peerMemory()->landingFor(landed[m], kTag));
    ASSERT_NE(place, nullptr) << "message " << m + 1 << " was not offered a landing";
    if (std::string(GetParam()) == "local") {
      EXPECT_EQ(place, out + at);
    }
    fill(place, landed[m], at, 1);
    tx.peerMemory()->postLanded(landed[m], static_cast<uint32_t>(m + 1));
    at += landed[m];
  }
  // The offer is full: the next message goes the ordinary way.
  EXPECT_EQ(tx.peerMemory()->landingFor(16, kTag), nullptr);
  slot = tx.sendSlotFor(16);
  ASSERT_NE(slot, nullptr);
  std::memset(slot, 0x5a, 16);
  tx.post(16, 99);

  const char* in = receive(rx, 0, first);
  ASSERT_NE(in, nullptr);
  std::memcpy(out, in, first);
  rx.release();
  at = first;
  for (size_t m = 0; m < landed.size(); ++m) {
    in = receive(rx, static_cast<uint32_t>(m + 1), landed[m]);
    EXPECT_EQ(in, out + at) << "a landed message must read as its place in the offer";
    rx.release();
    at += landed[m];
  }
  in = receive(rx, 99, 16);
  ASSERT_NE(in, nullptr);
  EXPECT_NE(in, out + at);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(static_cast<uint8_t>(in[i]), 0x5a);
  rx.release();
  for (uint64_t i = 0; i < total; ++i)
    ASSERT_EQ(static_cast<uint8_t>(out[i]), pattern(i, 1)) << "byte " << i;
  EXPECT_EQ(out[-1], 0);
  EXPECT_EQ(out[total], 0);
}

// A second offer replaces the first; the sender picks it up at its next message and counts
// the messages the receiver has not yet released towards it.
TEST_P(Landing, ANewOfferReplacesTheOld) {
  TransportPair pair(GetParam());
  auto c = pair.connect(0);
  transport::Connection& tx = *c.first;
  transport::Connection& rx = *c.second;
  MemfdRegion dst(1 << 20);
  std::memset(dst.data(), 0, 1 << 20);
  const uint32_t k64 = 64 << 10;
  ASSERT_TRUE(rx.peerMemory()->offerLanding(dst.data(), 2 * k64, kTag));
  char* place = static_cast<char*>(tx.peerMemory()->landingFor(2 * k64, kTag));
  ASSERT_NE(place, nullptr);
  fill(place, 2 * k64, 0, 2);
  tx.peerMemory()->postLanded(2 * k64, 1);
  EXPECT_EQ(receive(rx, 1, 2 * k64), dst.data());
  rx.release();
  // The second offer: two messages fill it back to back.
  char* second = dst.data() + 8 * k64;
  ASSERT_TRUE(rx.peerMemory()->offerLanding(second, 4 * k64, kTag));
  for (uint32_t m = 0; m < 2; ++m) {
    place = static_cast<char*>(tx.peerMemory()->landingFor(k64, kTag));
    ASSERT_NE(place, nullptr);
    fill(place, k64, m * k64, 3);
    tx.peerMemory()->postLanded(k64, 2 + m);
  }
  for (uint32_t m = 0; m < 2; ++m) {
    EXPECT_EQ(receive(rx, 2 + m, k64), second + m * k64);
    rx.release();
  }
  // What is left of the offer is too small for this one.
  EXPECT_EQ(tx.peerMemory()->landingFor(2 * k64 + 1, kTag), nullptr);
  for (uint64_t i = 0; i < 2 * k64; ++i) {
    ASSERT_EQ(static_cast<uint8_t>(dst.data()[i]), pattern(i, 2)) << "byte " << i;
    ASSERT_EQ(static_cast<uint8_t>(second[i]), pattern(i, 3)) << "byte " << i;
  }
  EXPECT_EQ(dst.data()[2 * k64], 0) << "nothing lands between the offers";
}

// A sender in another operation than the one the receiver waits in (ranks that called
// mismatched collectives) must not write into the receiver's buffer.
TEST_P(Landing, AnotherOperationDoesNotLand) {
  TransportPair pair(GetParam());
  auto c = pair.connect(0);
  MemfdRegion dst(1 << 20);
  ASSERT_TRUE(c.second->peerMemory()->offerLanding(dst.data(), 1 << 20, kTag));
  EXPECT_EQ(c.first->peerMemory()->landingFor(4096, kTag + 1), nullptr);
  EXPECT_NE(c.first->peerMemory()->landingFor(4096, kTag), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Transports, Landing, ::testing::Values("local", "shm"),
                         [](const auto& info) { return std::string(info.param); });

// A connection opened over a FIFO that an earlier one used ignores the offers already in
// memory (made for memory that may be gone) and takes those made from then on.
TEST(LandingFifo, ANewConnectionIgnoresOffersAlreadyMade) {
  const size_t bytes = transport::fifoBytes(4, 4096);
  auto block = [&] {
    void* p = std::aligned_alloc(4096, bytes);
    transport::fifoInit(p);
    return std::unique_ptr<void, decltype(&std::free)>(p, &std::free);
  };
  auto ab = block(), ba = block();
  auto open = [&](void* out, void* in) {
    transport::FifoConnection::Params p;
    p.outMem = out;
    p.inMem = in;
    p.slots = 4;
    p.slotBytes = 4096;
    p.remote = transport::RemoteMode::kDirect;
    return std::make_unique<transport::FifoConnection>(p);
  };
  std::vector<char> dst(1 << 16);
  auto sender = open(ab.get(), ba.get());
  auto receiver = open(ba.get(), ab.get());
  ASSERT_TRUE(receiver->peerMemory()->offerLanding(dst.data(), dst.size(), kTag));
  EXPECT_EQ(sender->peerMemory()->landingFor(4096, kTag), dst.data());
  sender.reset();
  auto again = open(ab.get(), ba.get());
  EXPECT_EQ(again->peerMemory()->landingFor(4096, kTag), nullptr)
      << "an offer from before must not be taken";
  ASSERT_TRUE(receiver->peerMemory()->offerLanding(dst.data() + 4096, 8192, kTag));
  EXPECT_EQ(again->peerMemory()->landingFor(4096, kTag), dst.data() + 4096);
}

// A receiver that cannot be reached offers nothing, and its sender finds no landing; a
// transport without peer memory (tcp) offers no such capability at all.
void expectNoLanding(const char* transport) {
  TransportPair pair(transport);
  auto c = pair.connect(0);
  if (!c.second->peerMemory()) {
    EXPECT_EQ(c.first->peerMemory(), nullptr);
    return;
  }
  std::vector<char> plain(1 << 20);
  EXPECT_FALSE(c.second->peerMemory()->offerLanding(plain.data(), plain.size(), kTag));
  EXPECT_EQ(c.first->peerMemory()->landingFor(4096, kTag), nullptr);
}

// shm reaches only ncclMemAlloc'd (registered) memory of its peer: no offer elsewhere.
TEST(LandingShm, UnregisteredMemoryIsNotOffered) { expectNoLanding("shm"); }

// tcp has no landing: the defaults say so.
TEST(LandingTcp, NotOffered) { expectNoLanding("tcp"); }

}  // namespace
}  // namespace weft::test
