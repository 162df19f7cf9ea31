// The memory of the kernel path's world (src/cuda/device_world.h) against the fake stream
// driver: everything is reserved when the first rank joins, uploads larger than the staging go
// in pieces, and the arena grows only while no launch of the world runs; otherwise a request
// that does not fit fails with an error naming the knob instead of allocating (which would
// synchronise the device under kernels waiting for peers).
#include "src/cuda/device_world.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "src/common/error.h"
#include "tests/unit/cuda/fake_stream_api.h"

namespace weft::cuda::test {
namespace {

const DriverApi& fakeApi() {
  static const DriverLoad load = loadDriver(WEFT_FAKE_STREAM_DRIVER);
  if (!load.api) throw std::runtime_error(load.why);
  return *load.api;
}

void waitForRelease(void* flag) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!static_cast<std::atomic<int>*>(flag)->load() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(DeviceWorld, ReservesAtJoinAndGrowsOnlyWhileQuiescent) {
  const DriverApi& api = fakeApi();
  DeviceWorld::Config config;
  config.arenaBytes = 1 << 20;
  config.stagingBytes = 64 << 10;
  std::string why;
  std::shared_ptr<DeviceWorld> world =
      DeviceWorld::join(api, 0x5745465457524c44ull, "0000:65:00.0", 0, config, &why);
  if (!world) GTEST_SKIP() << why;  // no kernel image in this build
  const size_t joined = world->allocations();
  EXPECT_EQ(joined, 1u) << "the arena, at join";
  // Status slots: pinned, zeroed, one per rank.
  const DeviceWorld::HostBlock s0 = world->statusOf(0), s7 = world->statusOf(7);
  EXPECT_NE(s0.host, s7.host);
  EXPECT_EQ(static_cast<const char*>(s7.host)[0], 0);

  // An upload three times the staging, in pieces, from the arena.
  std::vector<unsigned char> bytes(192 << 10);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  const CuDevicePtr p = world->upload(bytes.data(), bytes.size());
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(static_cast<uintptr_t>(p)), bytes.data(),
                        bytes.size()),
            0);
  EXPECT_EQ(world->allocations(), joined);

  // A launch of the world still runs: a request beyond the arena fails, naming the knob.
  void* stream = weftFakeStreamCreate();
  std::atomic<int> release{0};
  weftFakeLaunch(stream, waitForRelease, &release);
  auto done = std::make_shared<LaunchDone>();
  done->api = &api;
  done->stream = static_cast<CuStream>(stream);
  ASSERT_EQ(api.eventCreate(&done->event, kCuEventDisableTiming), kCuSuccess);
  ASSERT_EQ(api.eventRecord(done->event, static_cast<CuStream>(stream)), kCuSuccess);
  world->launched(done);
  try {
    world->allocate(1 << 20, false);
    ADD_FAILURE() << "allocated beyond the arena while a launch ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_DEVICE_ARENA_BYTES"), std::string::npos) << e.what();
  }
  EXPECT_EQ(world->allocations(), joined);

  // Once it finished the world is quiescent: the arena grows.
  release = 1;
  weftFakeStreamSynchronize(stream);
  const CuDevicePtr q = world->allocate(1 << 20, true);
  EXPECT_NE(q, 0u);
  EXPECT_EQ(world->allocations(), joined + 1);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(static_cast<uintptr_t>(q))[12345], 0);
  done.reset();
  world.reset();
  weftFakeStreamDestroy(stream);
}

}  // namespace
}  // namespace weft::cuda::test
