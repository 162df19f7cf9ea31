// Dead peers, abort and teardown: every wait ends with an error, never a hang.
#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

TEST(BootstrapFailureTest, PeerDestroyedMidRecvIsRemoteError) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  std::thread killer([&] {
    std::this_thread::sleep_for(200ms);
    ranks[1].reset();
  });
  auto start = std::chrono::steady_clock::now();
  int v;
  Caught c = errorOf([&] { ranks[0]->recv(1, 7, &v, sizeof(v)); });
  killer.join();
  EXPECT_EQ(c.code, Status::kRemoteError);
  EXPECT_NE(c.message.find("rank 1 ("), std::string::npos) << c.message;
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapFailureTest, MessagesSentBeforeDestructionAreStillDelivered) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 3);
  int a = 11, b = 22;
  ranks[1]->send(0, 3, &a, sizeof(a));
  ranks[2]->send(0, 4, &b, sizeof(b));  // rank 2 never sent to 0 before: a fresh connection
  ranks[1].reset();
  ranks[2].reset();
  int got = 0;
  ranks[0]->recv(1, 3, &got, sizeof(got));
  EXPECT_EQ(got, 11);
  ranks[0]->recv(2, 4, &got, sizeof(got));
  EXPECT_EQ(got, 22);
  EXPECT_EQ(errorOf([&] { ranks[0]->recv(1, 4, &got, sizeof(got)); }).code, Status::kRemoteError);
  EXPECT_EQ(errorOf([&] { ranks[0]->recv(2, 4, &got, sizeof(got)); }).code, Status::kRemoteError);
}

TEST(BootstrapFailureTest, RecvFromAGonePeerNeverConnectedIsRemoteError) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 4);
  ranks[2].reset();  // not a ring neighbour of rank 0
  auto start = std::chrono::steady_clock::now();
  int v;
  EXPECT_EQ(errorOf([&] { ranks[0]->recv(2, 1, &v, sizeof(v)); }).code, Status::kRemoteError);
  EXPECT_LT(secondsSince(start), 3.0);
  // A collective that needs the gone rank fails on its neighbour (rank 3); once a failing rank
  // aborts, as its communicator would, the failure reaches every rank as kRemoteError.
  std::vector<Caught> caught(4);
  runRanks(4, [&](int r) {
    if (r == 2) return;
    std::vector<int> buf(4);
    caught[r] = errorOf([&] { ranks[r]->allgather(buf.data(), sizeof(int)); });
    ranks[r]->abort();
  });
  for (int r : {0, 1, 3}) EXPECT_EQ(caught[r].code, Status::kRemoteError) << caught[r].message;
}

TEST(BootstrapFailureTest, SendToAGonePeerIsRemoteError) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  ranks[1].reset();
  Caught c;
  auto end = std::chrono::steady_clock::now() + 3s;
  std::vector<char> chunk(1 << 16);
  // The first sends may still land in socket buffers; the error must come soon.
  do {
    c = {};
    try {
      ranks[0]->send(1, 0, chunk.data(), chunk.size());
    } catch (const Error& e) {
      c = {e.code(), e.what()};
    }
  } while (c.code == Status::kSuccess && std::chrono::steady_clock::now() < end);
  EXPECT_EQ(c.code, Status::kRemoteError) << c.message;
}

TEST(BootstrapFailureTest, AbortUnblocksRecvAndFailsLaterCalls) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  std::thread aborter([&] {
    std::this_thread::sleep_for(200ms);
    ranks[0]->abort();
  });
  auto start = std::chrono::steady_clock::now();
  int v = 0;
  Caught c = errorOf([&] { ranks[0]->recv(1, 7, &v, sizeof(v)); });
  aborter.join();
  EXPECT_NE(c.code, Status::kSuccess);
  EXPECT_NE(c.message.find("aborted"), std::string::npos) << c.message;
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_NE(errorOf([&] { ranks[0]->send(1, 0, &v, sizeof(v)); }).code, Status::kSuccess);
  EXPECT_NE(errorOf([&] { ranks[0]->barrier(); }).code, Status::kSuccess);
  EXPECT_NE(errorOf([&] { ranks[0]->recv(0, 0, &v, sizeof(v)); }).code, Status::kSuccess);
  // The peer learns at once instead of waiting for a timeout.
  EXPECT_EQ(errorOf([&] { ranks[1]->recv(0, 7, &v, sizeof(v)); }).code, Status::kRemoteError);
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapFailureTest, AbortUnblocksAllgatherOnEveryRank) {
  constexpr int n = 3;
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), n);
  std::vector<Caught> caught(n);
  auto start = std::chrono::steady_clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(200ms);
    ranks[0]->abort();
  });
  // Rank 2 never joins the allgather, so ranks 0 and 1 block until the abort.
  runRanks(2, [&](int r) {
    std::vector<int> buf(n);
    caught[r] = errorOf([&] { ranks[r]->allgather(buf.data(), sizeof(int)); });
  });
  aborter.join();
  EXPECT_NE(caught[0].code, Status::kSuccess);
  EXPECT_EQ(caught[1].code, Status::kRemoteError) << caught[1].message;
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapFailureTest, DestructionIsPromptWhenPeersAreGone) {
  auto ranks = createAll(generateUniqueId(Tuning::fromEnvironment()), 3);
  ranks[1].reset();
  ranks[2].reset();
  auto start = std::chrono::steady_clock::now();
  ranks[0].reset();
  EXPECT_LT(secondsSince(start), 1.0);
  // And when a peer is mid-call on it.
  auto more = createAll(generateUniqueId(Tuning::fromEnvironment()), 2);
  std::thread waiter([&] {
    int v;
    EXPECT_EQ(errorOf([&] { more[1]->recv(0, 1, &v, sizeof(v)); }).code, Status::kRemoteError);
  });
  std::this_thread::sleep_for(100ms);
  start = std::chrono::steady_clock::now();
  more[0].reset();
  waiter.join();
  EXPECT_LT(secondsSince(start), 2.0);
}

}  // namespace
}  // namespace weft::bootstrap::test
