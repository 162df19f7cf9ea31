// A host stream holds at most kMaxQueued calls: a launch beyond them waits for room, and fails
// with a clear error (queueing nothing) when none comes in time.
#include "src/exec/host_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace weft::exec {
namespace {

using namespace std::chrono_literals;

TEST(HostStream, AFullQueueWaitsForRoomThenFailsClearly) {
  HostStream stream{Tuning{}};
  std::atomic<bool> started{false}, release{false};
  std::atomic<int> ran{0};
  std::string why;
  ASSERT_EQ(stream.enqueue(
                [&](std::string*) {
                  started = true;
                  while (!release) std::this_thread::sleep_for(1ms);
                  ++ran;
                  return Status::kSuccess;
                },
                &why),
            Status::kSuccess);
  while (!started) std::this_thread::sleep_for(1ms);  // the blocker left the queue
  auto count = [&](std::string*) {
    ++ran;
    return Status::kSuccess;
  };
  for (size_t i = 0; i < HostStream::kMaxQueued; ++i)
    ASSERT_EQ(stream.enqueue(count, &why, 1000ms), Status::kSuccess) << why;

  EXPECT_EQ(stream.enqueue(count, &why, 50ms), Status::kInternalError);
  EXPECT_NE(why.find("calls queued and none finished within 50 ms"), std::string::npos) << why;

  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    release = true;
  });
  why.clear();
  EXPECT_EQ(stream.enqueue(count, &why, 10000ms), Status::kSuccess) << why;
  releaser.join();
  ASSERT_EQ(stream.synchronize(10000ms, &why), Status::kSuccess) << why;
  // The blocker, the queue's worth, and the one that found room; the refused one never ran.
  EXPECT_EQ(ran.load(), static_cast<int>(HostStream::kMaxQueued) + 2);
}

}  // namespace
}  // namespace weft::exec
