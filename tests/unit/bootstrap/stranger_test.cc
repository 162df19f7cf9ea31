// Strangers on the root port and on a rank's own port are dropped without disturbing anything.
#include <cstring>

#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

void checkAllgather(std::vector<std::unique_ptr<Bootstrap>>& ranks) {
  int n = static_cast<int>(ranks.size());
  runRanks(n, [&](int r) {
    std::vector<uint64_t> v(static_cast<size_t>(n));
    v[r] = 0xabc0000ull + static_cast<uint64_t>(r);
    ranks[r]->allgather(v.data(), sizeof(uint64_t));
    for (int i = 0; i < n; ++i) EXPECT_EQ(v[i], 0xabc0000ull + static_cast<uint64_t>(i));
  });
}

TEST(BootstrapStrangerTest, StrangersAtTheRootDoNotDelayTheRealRanks) {
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  DecodedId d = decodeUniqueId(id);
  std::vector<Socket> strangers;

  // Garbage, much longer than a hello.
  strangers.push_back(connectRaw(d.root));
  std::vector<char> garbage(1 << 20, 'x');
  writeRaw(strangers.back(), garbage.data(), garbage.size());
  // A well-formed hello with the wrong secret.
  strangers.push_back(connectRaw(d.root));
  uint8_t hello[wire::kRootHelloBytes];
  Secret wrong = d.secret;
  wrong[31] ^= 1;
  wire::encodeRootHello(wrong, {wire::kRootHelloVersion, 0, 3, SocketAddress::parse("127.0.0.1:9")},
                        hello);
  writeRaw(strangers.back(), hello, sizeof(hello));
  // The right secret followed by garbage (bad version).
  strangers.push_back(connectRaw(d.root));
  std::memset(hello, 0xee, sizeof(hello));
  std::memcpy(hello, d.secret.data(), kSecretBytes);
  writeRaw(strangers.back(), hello, sizeof(hello));
  // Half a secret, then silence; and a connection that never says anything.
  strangers.push_back(connectRaw(d.root));
  writeRaw(strangers.back(), d.secret.data(), 16);
  strangers.push_back(connectRaw(d.root));
  // Connects and closes at once.
  connectRaw(d.root).close();

  auto start = std::chrono::steady_clock::now();
  auto ranks = createAll(id, 3);
  // The silent ones are still connected: the root served the ranks concurrently.
  EXPECT_LT(secondsSince(start), 2.0);
  checkAllgather(ranks);
}

TEST(BootstrapStrangerTest, StrangersAtARankPortAreDroppedAndLogged) {
  constexpr int n = 5;
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  DecodedId d = decodeUniqueId(id);
  auto ranks = createAll(id, n);
  TcpBootstrap& victim = tcp(*ranks[2]);
  SocketAddress target = victim.listenAddress();
  std::vector<Socket> strangers;

  strangers.push_back(connectRaw(target));  // silent, stays open
  strangers.push_back(connectRaw(target));  // garbage
  std::vector<char> garbage(100000, 'g');
  writeRaw(strangers.back(), garbage.data(), garbage.size());
  strangers.push_back(connectRaw(target));  // wrong secret
  uint8_t hello[wire::kPeerHelloBytes];
  Secret wrong = d.secret;
  wrong[0] ^= 0x80;
  wire::encodePeerHello(wrong, 0, hello);
  writeRaw(strangers.back(), hello, sizeof(hello));
  strangers.push_back(connectRaw(target));  // right secret, impossible rank
  wire::encodePeerHello(d.secret, 99, hello);
  writeRaw(strangers.back(), hello, sizeof(hello));
  strangers.push_back(connectRaw(target));  // right secret, claims its own rank
  wire::encodePeerHello(d.secret, 2, hello);
  writeRaw(strangers.back(), hello, sizeof(hello));
  strangers.push_back(connectRaw(target));  // right secret, impersonates a connected rank
  wire::encodePeerHello(d.secret, 1, hello);
  writeRaw(strangers.back(), hello, sizeof(hello));

  auto end = std::chrono::steady_clock::now() + 3s;
  while (victim.droppedConnections() < 5 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(victim.droppedConnections(), 5u);

  // Everything still works, including traffic that uses the victim's port for new connections.
  auto start = std::chrono::steady_clock::now();
  checkAllgather(ranks);
  runRanks(n, [&](int r) {
    for (int peer = 0; peer < n; ++peer) {
      int v = 100 * r + peer;
      ranks[r]->send(peer, 42, &v, sizeof(v));
    }
    for (int peer = 0; peer < n; ++peer) {
      int v = -1;
      ranks[r]->recv(peer, 42, &v, sizeof(v));
      EXPECT_EQ(v, 100 * peer + r);
    }
    ranks[r]->barrier();
  });
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(BootstrapStrangerTest, MalformedFrameFromAnAuthenticatedPeerIsBounded) {
  // Someone with the secret claims rank 0 towards rank 2 (not ring neighbours in 5 ranks) and
  // sends a frame header announcing 1 TiB: rank 2 must not allocate it and must report rank 0.
  constexpr int n = 5;
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  DecodedId d = decodeUniqueId(id);
  auto ranks = createAll(id, n);
  Socket fake = connectRaw(tcp(*ranks[2]).listenAddress());
  uint8_t buf[wire::kPeerHelloBytes + wire::kFrameHeaderBytes];
  wire::encodePeerHello(d.secret, 0, buf);
  wire::encodeFrameHeader({0, 7, 1ull << 40}, buf + wire::kPeerHelloBytes);
  writeRaw(fake, buf, sizeof(buf));
  int v;
  Caught c = errorOf([&] { ranks[2]->recv(0, 7, &v, sizeof(v)); });
  EXPECT_EQ(c.code, Status::kRemoteError);
  EXPECT_NE(c.message.find("rank 0"), std::string::npos) << c.message;
}

}  // namespace
}  // namespace weft::bootstrap::test
