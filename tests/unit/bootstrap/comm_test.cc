// Allgather, barrier and tagged send/recv with ranks as threads.
#include <algorithm>
#include <numeric>
#include <set>

#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

// Byte i of rank r's block: closed form, distinct across ranks and positions.
uint8_t pattern(int r, size_t i) { return static_cast<uint8_t>(r * 31 + i * 7 + (i >> 8)); }

class BootstrapRanksTest : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanksTest, CreateAllgatherBarrierSendRecvDestroy) {
  const int n = GetParam();
  UniqueIdBytes id = generateUniqueId(Tuning::fromEnvironment());
  auto ranks = createAll(id, n);
  const uint64_t hash = describe(id).secretHash;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->size(), n);
    EXPECT_EQ(ranks[r]->commHash(), hash);
  }

  runRanks(n, [&](int r) {
    Bootstrap& b = *ranks[r];
    // Allgather at several sizes, including one above the coalescing threshold.
    for (size_t bytes : {size_t{1}, size_t{13}, size_t{4096}, size_t{100003}}) {
      std::vector<uint8_t> buf(bytes * n, 0xff);
      for (size_t i = 0; i < bytes; ++i) buf[r * bytes + i] = pattern(r, i);
      b.allgather(buf.data(), bytes);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(buf[q * bytes + i], pattern(q, i)) << "block " << q << " byte " << i;
    }
    b.allgather(nullptr, 0);
    for (int i = 0; i < 3; ++i) b.barrier();

    // Ring: send to next, receive from prev.
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    int64_t out = 1000 + r, in = -1;
    b.send(next, 5, &out, sizeof(out));
    b.recv(prev, 5, &in, sizeof(in));
    EXPECT_EQ(in, 1000 + prev);

    // All pairs (self included), two tags each, received in the opposite order of sending and
    // with peers visited in a rank-dependent order.
    for (int k = 0; k < n; ++k) {
      int peer = (r + k) % n;
      int64_t a = r * 1000 + peer, c = -(r * 1000 + peer) - 1;
      b.send(peer, 100 + r, &a, sizeof(a));
      b.send(peer, -7, &c, sizeof(c));
    }
    for (int k = 0; k < n; ++k) {
      int peer = (r + n - k) % n;
      int64_t a = 0, c = 0;
      b.recv(peer, -7, &c, sizeof(c));
      b.recv(peer, 100 + peer, &a, sizeof(a));
      EXPECT_EQ(a, peer * 1000 + r);
      EXPECT_EQ(c, -(peer * 1000 + r) - 1);
    }
    b.barrier();
    ranks[r].reset();  // destroy concurrently
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanksTest, ::testing::Values(1, 2, 3, 5, 8, 16));

TEST(BootstrapCommTest, TwoCommunicatorsAtOnce) {
  UniqueIdBytes id[2] = {generateUniqueId(Tuning::fromEnvironment()),
                         generateUniqueId(Tuning::fromEnvironment())};
  EXPECT_NE(describe(id[0]).secretHash, describe(id[1]).secretHash);
  constexpr int n = 4;
  runRanks(2 * n, [&](int t) {
    int comm = t / n, r = t % n;
    auto b = Bootstrap::create(id[comm], r, n, 10s, Tuning::fromEnvironment().timeout);
    EXPECT_EQ(b->commHash(), describe(id[comm]).secretHash);
    for (int iter = 0; iter < 20; ++iter) {
      std::vector<int> v(n);
      v[r] = comm * 1000 + iter * 10 + r;
      b->allgather(v.data(), sizeof(int));
      for (int q = 0; q < n; ++q) ASSERT_EQ(v[q], comm * 1000 + iter * 10 + q);
    }
    b->barrier();
  });
}

TEST(BootstrapCommTest, ManyIdsInOneProcess) {
  std::set<std::string> roots;
  for (int i = 0; i < 30; ++i)
    roots.insert(describe(generateUniqueId(Tuning::fromEnvironment())).rootAddress);
  EXPECT_EQ(roots.size(), 30u);  // each id has its own root listener
}

TEST(BootstrapCommTest, MessagesOfManySizesAndConcurrentReceivers) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  // Sizes around the framing boundaries, and a large one.
  std::vector<size_t> sizes = {0, 1, 15, 16, 17, 65535, 65536, 65537, 8u << 20};
  runRanks(2, [&](int r) {
    if (r == 0) {
      for (size_t s : sizes) {
        std::vector<uint8_t> v(s);
        for (size_t i = 0; i < s; ++i) v[i] = pattern(static_cast<int>(s % 97), i);
        ranks[0]->send(1, static_cast<int>(s % 1000), v.data(), s);
      }
      int a = 1, c = 2;
      ranks[0]->send(1, 1, &a, sizeof(a));
      ranks[0]->send(1, 2, &c, sizeof(c));
    } else {
      for (size_t s : sizes) {
        std::vector<uint8_t> v(s);
        ranks[1]->recv(0, static_cast<int>(s % 1000), v.data(), s);
        for (size_t i = 0; i < s; ++i) ASSERT_EQ(v[i], pattern(static_cast<int>(s % 97), i));
      }
      // Two threads wait on the same peer for different tags.
      int got1 = 0, got2 = 0;
      std::thread t2([&] { ranks[1]->recv(0, 2, &got2, sizeof(got2)); });
      ranks[1]->recv(0, 1, &got1, sizeof(got1));
      t2.join();
      EXPECT_EQ(got1, 1);
      EXPECT_EQ(got2, 2);
    }
  });
}

TEST(BootstrapCommTest, MisuseIsReported) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  int v = 0;
  EXPECT_EQ(errorOf([&] { ranks[0]->send(2, 0, &v, sizeof(v)); }).code, Status::kInvalidArgument);
  EXPECT_EQ(errorOf([&] { ranks[0]->recv(-1, 0, &v, sizeof(v)); }).code, Status::kInvalidArgument);
  EXPECT_EQ(errorOf([&] { ranks[0]->send(1, 0, nullptr, 4); }).code, Status::kInvalidArgument);
  EXPECT_EQ(errorOf([&] { ranks[0]->allgather(nullptr, 4); }).code, Status::kInvalidArgument);
  // Size mismatch between send and recv.
  int64_t big = 5;
  ranks[0]->send(1, 3, &big, sizeof(big));
  Caught c = errorOf([&] { ranks[1]->recv(0, 3, &v, sizeof(v)); });
  EXPECT_EQ(c.code, Status::kInvalidUsage);
  EXPECT_NE(c.message.find("rank 0"), std::string::npos) << c.message;
  // Allgather size mismatch.
  std::vector<Caught> caught(2);
  runRanks(2, [&](int r) {
    std::vector<char> buf(2 * (r + 1));
    caught[r] = errorOf([&] { ranks[r]->allgather(buf.data(), static_cast<size_t>(r + 1)); });
  });
  EXPECT_EQ(caught[0].code, Status::kInvalidUsage);
  EXPECT_EQ(caught[1].code, Status::kInvalidUsage);
}

}  // namespace
}  // namespace weft::bootstrap::test
