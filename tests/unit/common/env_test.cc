// The environment knob registry: primary names, WEFT_* aliases, defaults, parsing.
#include "src/common/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <set>
#include <string>

#include "src/common/error.h"
#include "tests/support/scoped_env.h"

namespace weft {
namespace {

using test::ScopedEnv;

TEST(EnvTest, EveryKnobIsWellFormed) {
  std::set<std::string> names;
  for (const env::Knob& k : env::knobs()) {
    ASSERT_NE(k.name, nullptr);
    ASSERT_NE(k.fallback, nullptr) << k.name;
    ASSERT_NE(k.help, nullptr) << k.name;
    EXPECT_GT(std::strlen(k.help), 0u) << k.name;
    std::string name = k.name;
    // NCCL_ / WEFT_ knobs, MSCCL_ for the plan directory MSCCL users already set, and CUDA_
    // for what CUDA itself reads and the library must know (hardware queues, MPS).
    EXPECT_TRUE(name.rfind("NCCL_", 0) == 0 || name.rfind("WEFT_", 0) == 0 ||
                name.rfind("MSCCL_", 0) == 0 || name.rfind("CUDA_", 0) == 0)
        << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    if (k.alias) {
      EXPECT_EQ(std::string(k.alias).rfind("WEFT_", 0), 0u) << k.alias;
      EXPECT_TRUE(names.insert(k.alias).second) << "duplicate " << k.alias;
    }
  }
}

TEST(EnvTest, DefaultWhenUnset) {
  ScopedEnv a("WEFT_SLOTS", nullptr);
  EXPECT_FALSE(env::isSet("WEFT_SLOTS"));
  EXPECT_EQ(env::get("WEFT_SLOTS"), "8");
  EXPECT_EQ(env::getInt("WEFT_SLOTS"), 8);
  ScopedEnv b("WEFT_SIMD", nullptr);
  EXPECT_EQ(env::get("WEFT_SIMD"), "");
}

TEST(EnvTest, PrimaryNameWins) {
  ScopedEnv a("NCCL_ALGO", "ring");
  ScopedEnv b("WEFT_ALGO", "tree");
  EXPECT_TRUE(env::isSet("NCCL_ALGO"));
  EXPECT_EQ(env::get("NCCL_ALGO"), "ring");
}

TEST(EnvTest, AliasUsedWhenPrimaryUnset) {
  ScopedEnv a("NCCL_ALGO", nullptr);
  ScopedEnv b("WEFT_ALGO", "tree");
  EXPECT_TRUE(env::isSet("NCCL_ALGO"));
  EXPECT_EQ(env::get("NCCL_ALGO"), "tree");
}

TEST(EnvTest, IntegersParseWithBases) {
  {
    ScopedEnv a("WEFT_SLOT_BYTES", "4096");
    EXPECT_EQ(env::getInt("WEFT_SLOT_BYTES"), 4096);
  }
  {
    ScopedEnv a("WEFT_SLOT_BYTES", "0x100");
    EXPECT_EQ(env::getInt("WEFT_SLOT_BYTES"), 256);
  }
  {
    ScopedEnv a("WEFT_SPIN_US", "-5");
    EXPECT_EQ(env::getInt("WEFT_SPIN_US"), -5);
  }
}

TEST(EnvTest, BadIntegerFallsBackToDefault) {
  ScopedEnv quiet("NCCL_DEBUG", "NONE");
  ScopedEnv a("WEFT_SLOTS", "eight");
  EXPECT_EQ(env::getInt("WEFT_SLOTS"), 8);
  ScopedEnv b("WEFT_SLOTS", "12abc");
  EXPECT_EQ(env::getInt("WEFT_SLOTS"), 8);
  ScopedEnv c("WEFT_SLOTS", "");
  EXPECT_EQ(env::getInt("WEFT_SLOTS"), 8);
}

TEST(EnvTest, Doubles) {
  ScopedEnv a("WEFT_TIMEOUT_MS", "1.5");
  EXPECT_DOUBLE_EQ(env::getDouble("WEFT_TIMEOUT_MS"), 1.5);
}

TEST(EnvTest, UnregisteredNameThrows) {
  EXPECT_THROW(env::get("WEFT_NO_SUCH_KNOB"), Error);
  EXPECT_THROW(env::isSet("NCCL_NO_SUCH_KNOB"), Error);
  try {
    env::getInt("WEFT_NO_SUCH_KNOB");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::kInternalError);
    EXPECT_NE(std::string(e.what()).find("WEFT_NO_SUCH_KNOB"), std::string::npos);
  }
}

TEST(EnvTest, DumpDoesNotThrow) { EXPECT_NO_THROW(env::dump()); }

}  // namespace
}  // namespace weft
