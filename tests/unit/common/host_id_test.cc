// The host identity: one hash for the transports and the topology, which WEFT_HOST_ID splits.
#include "src/common/host_id.h"

#include <gtest/gtest.h>

#include "tests/support/scoped_env.h"

namespace weft {
namespace {

using test::ScopedEnv;

TEST(HostId, Fnv1aMatchesTheReferenceValues) {
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

TEST(HostId, HostIdKnobTellsHostsOnOneMachineApart) {
  uint64_t plain = 0, a = 0, again = 0, b = 0;
  {
    ScopedEnv unset("WEFT_HOST_ID", nullptr);
    plain = hostHash(Tuning::fromEnvironment().hostId);
  }
  {
    ScopedEnv id("WEFT_HOST_ID", "a");
    a = hostHash(Tuning::fromEnvironment().hostId);
    again = hostHash(Tuning::fromEnvironment().hostId);
  }
  {
    ScopedEnv id("WEFT_HOST_ID", "b");
    b = hostHash(Tuning::fromEnvironment().hostId);
  }
  EXPECT_EQ(a, again);
  EXPECT_NE(plain, a);
  EXPECT_NE(a, b);
  ScopedEnv unset("WEFT_HOST_ID", nullptr);
  EXPECT_EQ(hostHash(Tuning::fromEnvironment().hostId), plain);
}

}  // namespace
}  // namespace weft
