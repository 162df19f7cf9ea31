// Unique id encoding, secrets and wire codecs.
#include <cstring>
#include <random>
#include <set>

#include "src/bootstrap/secret.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"
#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

TEST(BootstrapIdTest, RoundTripsIpv4AndIpv6) {
  for (const char* text : {"10.1.2.3:4567", "[fd00::2]:80", "[fe80::1%7]:9"}) {
    SocketAddress root = SocketAddress::parse(text);
    Secret secret = randomSecret();
    UniqueIdBytes id = encodeUniqueId(root, secret);
    DecodedId d = decodeUniqueId(id);
    EXPECT_TRUE(d.root == root) << text;
    EXPECT_EQ(d.secret, secret);
    IdInfo info = describe(id);
    EXPECT_EQ(info.rootAddress, root.toString());
    EXPECT_EQ(info.secretHash, secretHash(secret));
  }
}

TEST(BootstrapIdTest, GeneratedIdsAreDistinctAndDescribable) {
  std::set<uint64_t> hashes;
  for (int i = 0; i < 20; ++i) {
    UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
    IdInfo info = describe(id);
    EXPECT_NE(info.rootAddress.find(':'), std::string::npos);
    EXPECT_NE(SocketAddress::parse(info.rootAddress).port(), 0);
    hashes.insert(info.secretHash);
  }
  EXPECT_EQ(hashes.size(), 20u);
}

TEST(BootstrapIdTest, RandomBytesAreRejected) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    UniqueIdBytes id;
    for (auto& c : id.bytes) c = static_cast<char>(rng());
    if (i == 0) std::memset(id.bytes, 0, sizeof(id.bytes));
    if (i == 1) std::memcpy(id.bytes, "WEFT\x01", 5);  // right magic, garbage after
    EXPECT_EQ(errorOf([&] { describe(id); }).code, Status::kInvalidArgument);
    if (i < 5) {
      EXPECT_EQ(
          errorOf([&] { Bootstrap::create(id, 0, 2, 1s, Tuning::fromEnvironment().timeout); }).code,
          Status::kInvalidArgument);
    }
  }
}

TEST(BootstrapIdTest, EverySingleByteCorruptionIsRejected) {
  UniqueIdBytes good = encodeUniqueId(SocketAddress::parse("127.0.0.1:1000"), randomSecret());
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    UniqueIdBytes bad = good;
    bad.bytes[i] ^= 0x20;
    Caught c = errorOf([&] { describe(bad); });
    EXPECT_EQ(c.code, Status::kInvalidArgument) << "byte " << i;
    EXPECT_NE(c.message.find("malformed unique id"), std::string::npos);
  }
}

TEST(BootstrapIdTest, SecretHelpers) {
  Secret a = randomSecret(), b = a;
  EXPECT_NE(a, randomSecret());
  EXPECT_TRUE(secretsEqual(a.data(), b.data()));
  for (size_t i = 0; i < kSecretBytes; ++i) {
    b = a;
    b[i] ^= 1;
    EXPECT_FALSE(secretsEqual(a.data(), b.data()));
  }
  EXPECT_EQ(secretHash(a), secretHash(a));
  EXPECT_NE(secretHash(a), secretHash(b));
  EXPECT_EQ(hashBytes("abc", 3), hashBytes("abc", 3));
  EXPECT_NE(hashBytes("abc", 3), hashBytes("abd", 3));
}

TEST(BootstrapIdTest, WireCodecs) {
  uint8_t buf[wire::kRootHelloBytes];
  Secret s = randomSecret();
  wire::RootHello in{wire::kRootHelloVersion, 3, 8, SocketAddress::parse("[::1]:4242")};
  wire::encodeRootHello(s, in, buf);
  EXPECT_EQ(std::memcmp(buf, s.data(), kSecretBytes), 0);  // the secret goes first
  wire::RootHello out;
  ASSERT_TRUE(wire::decodeRootHello(buf, &out));
  EXPECT_EQ(out.rank, 3);
  EXPECT_EQ(out.nranks, 8);
  EXPECT_TRUE(out.listen == in.listen);

  uint8_t addr[wire::kAddressBytes];
  wire::encodeAddress(SocketAddress::parse("1.2.3.4:5"), addr);
  SocketAddress a;
  EXPECT_TRUE(wire::decodeAddress(addr, &a));
  EXPECT_EQ(a.toString(), "1.2.3.4:5");
  uint8_t bad[wire::kAddressBytes];
  std::memcpy(bad, addr, sizeof(addr));
  bad[0] = 5;  // unknown family
  EXPECT_FALSE(wire::decodeAddress(bad, &a));
  std::memcpy(bad, addr, sizeof(addr));
  bad[2] = bad[3] = 0;  // port 0
  EXPECT_FALSE(wire::decodeAddress(bad, &a));
  std::memcpy(bad, addr, sizeof(addr));
  bad[12] = 1;  // bytes past an IPv4 address must be zero
  EXPECT_FALSE(wire::decodeAddress(bad, &a));

  uint8_t frame[wire::kFrameHeaderBytes];
  wire::encodeFrameHeader({1, -5, 1ull << 40}, frame);
  wire::FrameHeader h = wire::decodeFrameHeader(frame);
  EXPECT_EQ(h.channel, 1u);
  EXPECT_EQ(h.tag, -5);
  EXPECT_EQ(h.length, 1ull << 40);
}

}  // namespace
}  // namespace weft::bootstrap::test
