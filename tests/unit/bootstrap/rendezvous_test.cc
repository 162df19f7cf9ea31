// The root rendezvous: env knobs, root lifetime, rank validation, timeouts.
#include <cstdlib>
#include <cstring>

#include "src/bootstrap/root.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "tests/support/scoped_env.h"
#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

using weft::test::ScopedEnv;

void expectAllgatherWorks(std::vector<std::unique_ptr<Bootstrap>>& ranks) {
  int n = static_cast<int>(ranks.size());
  runRanks(n, [&](int r) {
    std::vector<int> v(static_cast<size_t>(n), -1);
    v[r] = 10 * r + 1;
    ranks[r]->allgather(v.data(), sizeof(int));
    for (int i = 0; i < n; ++i) EXPECT_EQ(v[i], 10 * i + 1);
  });
}

bool waitForRootCount(size_t want, std::chrono::milliseconds within) {
  auto end = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < end) {
    if (liveRootCount() <= want) return true;
    std::this_thread::sleep_for(10ms);
  }
  return liveRootCount() <= want;
}

TEST(BootstrapRendezvousTest, CommIdSelectsTheRootAddress) {
  uint16_t port = freeLoopbackPort();
  ScopedEnv env("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  EXPECT_EQ(describe(id).rootAddress, "127.0.0.1:" + std::to_string(port));
  auto ranks = createAll(id, 3);
  expectAllgatherWorks(ranks);
}

TEST(BootstrapRendezvousTest, CommIdIpv6) {
  try {
    Socket probe = Socket::listen(SocketAddress::parse("[::1]:0"));
  } catch (const Error&) {
    GTEST_SKIP() << "no IPv6 loopback";
  }
  uint16_t port;
  {
    Socket probe = Socket::listen(SocketAddress::parse("[::1]:0"));
    port = probe.localAddress().port();
  }
  ScopedEnv env("NCCL_COMM_ID", "[::1]:" + std::to_string(port));
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  EXPECT_EQ(describe(id).rootAddress, "[::1]:" + std::to_string(port));
  auto ranks = createAll(id, 2);
  EXPECT_EQ(tcp(*ranks[0]).listenAddress().family(), AF_INET6);
  expectAllgatherWorks(ranks);
}

TEST(BootstrapRendezvousTest, BadCommIdIsInvalidArgument) {
  ScopedEnv env("NCCL_COMM_ID", "not-an-address");
  EXPECT_EQ(errorOf([] { generateUniqueId(Tuning::fromEnvironment()); }).code,
            Status::kInvalidArgument);
}

TEST(BootstrapRendezvousTest, SocketIfnameSelectsLoopback) {
  ScopedEnv env("NCCL_SOCKET_IFNAME", "=lo");
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  EXPECT_EQ(describe(id).rootAddress.rfind("127.0.0.1:", 0), 0u) << describe(id).rootAddress;
  auto ranks = createAll(id, 2);
  expectAllgatherWorks(ranks);
}

TEST(BootstrapRendezvousTest, RootExitsAfterItsRendezvous) {
  size_t before = liveRootCount();
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  EXPECT_GE(liveRootCount(), 1u);  // other tests' roots may end meanwhile
  auto ranks = createAll(id, 4);
  EXPECT_TRUE(waitForRootCount(before, 3s));
  // The id is single-use: with the root gone a late joiner times out.
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, 0, 4, 200ms, Tuning::fromEnvironment().timeout); }).code,
      Status::kSystemError);
}

TEST(BootstrapRendezvousTest, RootExitsAfterItsTimeout) {
  size_t before = liveRootCount();
  UniqueIdBytes id;
  {
    ScopedEnv env("WEFT_BOOTSTRAP_TIMEOUT_MS", "300");
    id = generateUniqueId(Tuning::fromEnvironment());
  }
  EXPECT_GE(liveRootCount(), 1u);  // other tests' roots may end meanwhile
  EXPECT_TRUE(waitForRootCount(before, 3s));
}

TEST(BootstrapRendezvousTest, RootTimeoutIsReportedToWaitingRanks) {
  UniqueIdBytes id;
  {
    ScopedEnv env("WEFT_BOOTSTRAP_TIMEOUT_MS", "300");
    id = generateUniqueId(Tuning::fromEnvironment());
  }
  auto start = std::chrono::steady_clock::now();
  Caught c = errorOf([&] { Bootstrap::create(id, 0, 2, 10s, Tuning::fromEnvironment().timeout); });
  EXPECT_EQ(c.code, Status::kSystemError);
  EXPECT_NE(c.message.find("timed out"), std::string::npos) << c.message;
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapRendezvousTest, BadArgumentsAreInvalidArgument) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, 3, 3, 1s, Tuning::fromEnvironment().timeout); }).code,
      Status::kInvalidArgument);
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, -1, 3, 1s, Tuning::fromEnvironment().timeout); }).code,
      Status::kInvalidArgument);
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, 0, 0, 1s, Tuning::fromEnvironment().timeout); }).code,
      Status::kInvalidArgument);
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, 0, 1, 0ms, Tuning::fromEnvironment().timeout); }).code,
      Status::kInvalidArgument);
  // The id is still good for a correct rendezvous.
  auto ranks = createAll(id, 1);
  EXPECT_EQ(ranks[0]->size(), 1);
}

// Starts ranks 0..n-2 of n in the background, then lets `intruder` run once they have arrived.
void withLateIntruder(int n, const std::function<void(const UniqueIdBytes&)>& intruder) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  std::vector<std::unique_ptr<Bootstrap>> ranks(static_cast<size_t>(n));
  std::thread early([&] {
    runRanks(n - 1, [&](int r) {
      ranks[r] = Bootstrap::create(id, r, n, 10s, Tuning::fromEnvironment().timeout);
    });
  });
  std::this_thread::sleep_for(300ms);  // let the real ranks reach the root first
  intruder(id);
  ranks[n - 1] = Bootstrap::create(id, n - 1, n, 10s, Tuning::fromEnvironment().timeout);
  early.join();
  expectAllgatherWorks(ranks);
}

TEST(BootstrapRendezvousTest, DuplicateRankIsRejectedAndTheOthersContinue) {
  withLateIntruder(3, [](const UniqueIdBytes& id) {
    Caught c = errorOf([&] { Bootstrap::create(id, 1, 3, 5s, Tuning::fromEnvironment().timeout); });
    EXPECT_EQ(c.code, Status::kInvalidUsage);
    EXPECT_NE(c.message.find("already joined"), std::string::npos) << c.message;
  });
}

TEST(BootstrapRendezvousTest, NranksMismatchIsRejectedAndTheOthersContinue) {
  withLateIntruder(3, [](const UniqueIdBytes& id) {
    Caught c = errorOf([&] { Bootstrap::create(id, 2, 4, 5s, Tuning::fromEnvironment().timeout); });
    EXPECT_EQ(c.code, Status::kInvalidUsage);
    EXPECT_NE(c.message.find("nranks"), std::string::npos) << c.message;
  });
}

TEST(BootstrapRendezvousTest, HandCraftedBadRankIsToldAndDropped) {
  withLateIntruder(3, [](const UniqueIdBytes& id) {
    DecodedId d = decodeUniqueId(id);
    Socket s = connectRaw(d.root);
    uint8_t hello[wire::kRootHelloBytes];
    wire::encodeRootHello(
        d.secret, {wire::kRootHelloVersion, 7, 3, SocketAddress::parse("127.0.0.1:9")}, hello);
    writeRaw(s, hello, sizeof(hello));
    uint8_t reply[wire::kRootReplyHeaderBytes];
    s.recvAll(reply, sizeof(reply), Deadline(5s), -1, "reply");
    EXPECT_EQ(wire::decodeRootReply(reply).status,
              static_cast<uint32_t>(wire::RootStatus::kRankOutOfRange));
  });
}

TEST(BootstrapRendezvousTest, MissingRankTimesOutTheOthers) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  auto start = std::chrono::steady_clock::now();
  std::vector<Caught> caught(2);
  runRanks(2, [&](int r) {
    caught[r] =
        errorOf([&] { Bootstrap::create(id, r, 3, 400ms, Tuning::fromEnvironment().timeout); });
  });
  for (const auto& c : caught) {
    EXPECT_EQ(c.code, Status::kSystemError);
    EXPECT_NE(c.message.find("timed out"), std::string::npos) << c.message;
    EXPECT_NE(c.message.find("400 ms"), std::string::npos) << c.message;
  }
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapRendezvousTest, RankThatGaveUpCanRejoin) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  // Rank 0 gives up alone; the root frees its slot, and a second attempt completes.
  EXPECT_EQ(
      errorOf([&] { Bootstrap::create(id, 0, 2, 200ms, Tuning::fromEnvironment().timeout); }).code,
      Status::kSystemError);
  std::this_thread::sleep_for(100ms);
  auto ranks = createAll(id, 2);
  expectAllgatherWorks(ranks);
}

}  // namespace
}  // namespace weft::bootstrap::test
