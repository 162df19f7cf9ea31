// The ib transport against a broken or hostile peer, a peer that never shows up, and a port that
// goes down: every case ends in an error on the connection that names the peer, never in a write
// outside the registered FIFOs (a forged key or address is refused by the HCA). Also: the
// progress thread rings the owner's doorbell when a message arrives. Real verbs: runs where
// WEFT_TEST_IB is set (tests/vm, over soft-RoCE); WEFT_TEST_IB_NETDEV names the device's netdev
// for the port-down case, which takes the link down and up again.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "src/common/clock.h"
#include "tests/conformance/pair_harness.h"
#include "tests/ib/ib_pair_fixture.h"
#include "transports/ib/connection.h"
#include "transports/ib/progress.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;

class IbPeer : public IbPairTest {
 protected:
  void TearDown() override {
    ib::setSetupForgerForTesting(nullptr);
    IbPairTest::TearDown();
  }
};

// Waits until `c` reports an error (polling as the executor's slow path does); returns it.
std::string awaitFailure(transport::Connection& c, std::chrono::seconds limit) {
  auto deadline = Clock::now() + limit;
  std::string why;
  while (Clock::now() < deadline) {
    uint32_t bytes = 0, tag = 0;
    EXPECT_EQ(c.recvSlot(&bytes, &tag), nullptr) << "a message arrived from a broken peer";
    if (c.health(&why) != Status::kSuccess) return why;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

// Sends one message each way, so both ends are set up.
void exchange(TransportPair::Conn& a, TransportPair::Conn& b) {
  for (auto [tx, rx] : {std::pair{a.get(), b.get()}, std::pair{b.get(), a.get()}}) {
    auto deadline = Clock::now() + std::chrono::seconds(20);
    void* slot = nullptr;
    while (!(slot = tx->sendSlot())) ASSERT_LT(Clock::now(), deadline);
    std::memset(slot, 0x5a, 100);
    tx->post(100, 1);
    uint32_t bytes = 0, tag = 0;
    const void* got = nullptr;
    while (!(got = rx->recvSlot(&bytes, &tag))) {
      ASSERT_LT(Clock::now(), deadline);
      std::this_thread::yield();
    }
    ASSERT_EQ(bytes, 100u);
    ASSERT_EQ(static_cast<const uint8_t*>(got)[99], 0x5a);
    rx->release();
  }
}

// Rank 0 sends into rank 1's FIFO as described by rank 1's forged setup message.
void expectSendRefused(TransportPair& pair, const char* expect) {
  auto c = pair.connect(0);
  auto deadline = Clock::now() + std::chrono::seconds(20);
  void* slot = nullptr;
  while (!(slot = c.first->sendSlot())) ASSERT_LT(Clock::now(), deadline);
  std::memset(slot, 0xee, 1000);
  c.first->post(1000, 0);
  const std::string why = awaitFailure(*c.first, std::chrono::seconds(20));
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find(expect), std::string::npos) << why;
  // The receiver never sees the message (it may or may not see an error of its own).
  uint32_t bytes = 0, tag = 0;
  EXPECT_EQ(c.second->recvSlot(&bytes, &tag), nullptr);
}

TEST_F(IbPeer, ForgedKeyIsRefusedByTheHca) {
  ib::setSetupForgerForTesting([](int rank, ib::QpInfo* i) {
    if (rank == 1) i->recvKey ^= 0x00ff00ff;
  });
  expectSendRefused(*pair_, "completion error");
}

TEST_F(IbPeer, AddressOutsideTheRegisteredFifoIsRefusedByTheHca) {
  ib::setSetupForgerForTesting([](int rank, ib::QpInfo* i) {
    if (rank == 1) i->recvAddr += ib::fifoBytes(i->slots, i->slotBytes) + 4096;
  });
  expectSendRefused(*pair_, "completion error");
}

TEST_F(IbPeer, MalformedSetupMessagesFailTheSetup) {
  struct Case {
    const char* expect;
    void (*forge)(int, ib::QpInfo*);
  };
  const Case cases[] = {
      {"malformed setup message", [](int r, ib::QpInfo* i) { i->magic ^= r; }},
      {"uses a FIFO of", [](int r, ib::QpInfo* i) { i->slots += r; }},
      {"receive FIFO address",
       [](int r, ib::QpInfo* i) { i->recvAddr = r ? UINT64_MAX - 8 : i->recvAddr; }},
      {"invalid queue pair number", [](int r, ib::QpInfo* i) { i->qpn[0] = r ? 0 : i->qpn[0]; }},
  };
  int channel = 0;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.expect);
    ib::setSetupForgerForTesting(k.forge);
    auto c = pair_->connect(channel++);
    const std::string why = awaitFailure(*c.first, std::chrono::seconds(20));
    EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
    EXPECT_NE(why.find(k.expect), std::string::npos) << why;
    EXPECT_EQ(c.first->sendSlot(), nullptr);
  }
}

TEST_F(IbPeer, GarbageControlByteFailsTheConnection) {
  auto c = pair_->connect(0);
  exchange(c.first, c.second);
  ib(c.first).sendControlBytesForTesting("RZ");
  const std::string why = awaitFailure(*c.second, std::chrono::seconds(10));
  EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  EXPECT_NE(why.find("garbage control byte"), std::string::npos) << why;
}

// The executor asks a connection whether its peer poisoned it while the setup may still run;
// that check must not take the peer's queue-pair info for control bytes. The progress thread is
// held once the accepting side has sent its info (from the setup forger, on that thread), so the
// info waits unread on the connecting side's socket when the check comes.
std::atomic<bool> acceptorSentInfo{false};

TEST_F(IbPeer, PoisonCheckDuringTheSetupLeavesItIntact) {
  acceptorSentInfo = false;
  ib::setSetupForgerForTesting([](int rank, ib::QpInfo*) {
    if (rank != 1) return;
    ib::ProgressThread::get().holdForTesting(true);
    acceptorSentInfo = true;
  });
  auto c = pair_->connect(0);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!acceptorSentInfo.load()) {
    ASSERT_LT(Clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ib::setSetupForgerForTesting(nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the info reaches the socket
  EXPECT_FALSE(c.first->poisoned());
  EXPECT_FALSE(c.second->poisoned());
  ib::ProgressThread::get().holdForTesting(false);
  exchange(c.first, c.second);
  std::string why;
  EXPECT_EQ(c.first->health(&why), Status::kSuccess) << why;
  EXPECT_EQ(c.second->health(&why), Status::kSuccess) << why;
}

TEST_F(IbPeer, GarbageImmediatesFailTheConnection) {
  const uint32_t bad[] = {ib::dataImmediate(9, 1),  // past the 8 slots
                          ib::dataImmediate(0, 2),  // more parts than queue pairs
                          ib::kCreditBit | 3};      // a credit written as data
  int channel = 0;
  for (uint32_t imm : bad) {
    SCOPED_TRACE(imm);
    auto c = pair_->connect(channel++);
    exchange(c.first, c.second);
    ib(c.first).postImmediateForTesting(imm);
    const std::string why = awaitFailure(*c.second, std::chrono::seconds(10));
    EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  }
}

TEST_F(IbPeer, SetupWithoutThePeerTimesOut) {
  pair_->ctx(0).timeout = std::chrono::milliseconds(1500);
  auto lonely = pair_->transport().connect(pair_->ctx(0), 1, 0);  // rank 1 never connects
  const auto start = Clock::now();
  std::string why;
  while (lonely->health(&why) == Status::kSuccess) {
    ASSERT_LT(Clock::now() - start, std::chrono::seconds(10)) << "no setup deadline";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find("did not complete the connection setup"), std::string::npos) << why;
}

// Nothing but the progress thread polls rank 1's connection while it sleeps on its doorbell.
TEST_F(IbPeer, ArrivalRingsTheOwnersDoorbell) {
  auto c = pair_->connect(0);
  exchange(c.first, c.second);
  Doorbell* bell = pair_->ctx(1).selfBell;
  const uint32_t seen = bell->announce();
  void* slot = c.first->sendSlot();
  ASSERT_NE(slot, nullptr);
  c.first->post(8, 2);
  const auto start = Clock::now();
  bell->sleep(seen, 5000000000ull);
  bell->retire();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "the doorbell was not rung";
  EXPECT_NE(bell->seq.load(), seen);
  uint32_t bytes = 0, tag = 0;
  EXPECT_NE(c.second->recvSlot(&bytes, &tag), nullptr);
}

// Last: takes the link of the device's netdev down (and up again afterwards).
TEST_F(IbPeer, PortDownFailsEveryConnectionOnIt) {
  const char* netdev = getenv("WEFT_TEST_IB_NETDEV");
  if (!netdev) GTEST_SKIP() << "set WEFT_TEST_IB_NETDEV to the RDMA device's netdev";
  auto a = pair_->connect(0);
  auto b = pair_->connect(1);
  exchange(a.first, a.second);
  exchange(b.first, b.second);
  const std::string down = std::string("ip link set dev ") + netdev + " down";
  ASSERT_EQ(std::system(down.c_str()), 0);
  for (auto* c : {a.first.get(), a.second.get(), b.first.get(), b.second.get()}) {
    const std::string why = awaitFailure(*c, std::chrono::seconds(5));
    EXPECT_NE(why.find("port went down"), std::string::npos) << why;
    EXPECT_NE(why.find("rank "), std::string::npos) << why;
  }
  const std::string up = std::string("ip link set dev ") + netdev + " up";
  EXPECT_EQ(std::system(up.c_str()), 0);
}

}  // namespace
}  // namespace weft::test
