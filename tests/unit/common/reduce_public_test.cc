// The public entry points of the kernels: the active SIMD level, reduce and copyElements, and
// cached against streaming stores at every length, alignment and overlap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/common/reduce_reference.h"

namespace weft {
namespace {

using namespace reduce_reference;

TEST(ReducePublicTest, SimdLevelNamesTheActiveLevel) {
  std::string name = simdLevel();
  EXPECT_TRUE(name == "scalar" || name == "avx2" || name == "avx512") << name;
  EXPECT_EQ(name, kernels::simdLevelName(kernels::activeSimdLevel()));
  EXPECT_LE(static_cast<int>(kernels::activeSimdLevel()),
            static_cast<int>(kernels::cpuSimdLevel()));
}

TEST(ReducePublicTest, ReduceUsesActiveLevel) {
  const size_t n = 4099;
  std::vector<float> a(n), b(n), d(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 0.5f * static_cast<float>(i);
  reduce(DataType::kFloat32, RedOp::kSum, d.data(), a.data(), false, b.data(), false, n, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(d[i], 1.5f * static_cast<float>(i));
  reduce(DataType::kFloat32, RedOp::kSum, d.data(), a.data(), false, b.data(), false, 0, nullptr);
}

TEST(ReducePublicTest, CopyWithoutScalarIsMemcpy) {
  std::vector<unsigned char> src(1001), dst(1001, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7);
  copyElements(DataType::kInt32, dst.data() + 1, src.data() + 1, 250, nullptr);
  EXPECT_EQ(dst[0], 0);
  EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + 1, 1000), 0);
  copyElements(DataType::kInt32, src.data(), src.data(), 250, nullptr);  // dst == src
  copyElements(DataType::kFloat64, dst.data(), src.data(), 0, nullptr);
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(src[i], static_cast<unsigned char>(i * 7));
}

TEST(ReducePublicTest, StreamingCopyMatchesMemcpyAtEveryAlignment) {
  // Lengths around the 64-byte lines and the 128-byte unrolled body, destinations at every
  // offset within a line (the head up to a line boundary is copied plainly).
  std::vector<unsigned char> src(4096 + 256), dst(4096 + 256);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13 + 5);
  for (size_t len : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(127),
                     size_t(128), size_t(129), size_t(1000), size_t(4096)})
    for (size_t dOff = 0; dOff < 64; dOff += 7)
      for (size_t sOff : {size_t(0), size_t(3)}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        copyElements(DataType::kUint8, dst.data() + dOff, src.data() + sOff, len, nullptr,
                     Store::kStreaming);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dOff && i < dOff + len;
          ASSERT_EQ(dst[i], inside ? src[i - dOff + sOff] : 0xee)
              << "len " << len << " dst offset " << dOff << " src offset " << sOff << " byte " << i;
        }
      }
  // Overlapping regions fall back to memmove.
  std::vector<unsigned char> buf(src.begin(), src.begin() + 1024);
  copyElements(DataType::kUint8, buf.data() + 64, buf.data(), 512, nullptr, Store::kStreaming);
  for (size_t i = 0; i < 512; ++i) ASSERT_EQ(buf[64 + i], src[i]);
}

TEST(ReducePublicTest, SmallCopiesMatchMemmoveAtEveryLengthAndOverlap) {
  // Up to 64 bytes copy inline: every length, both directions of overlap, and apart.
  std::vector<unsigned char> pattern(256);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 29 + 3);
  for (size_t len = 0; len <= 66; ++len)
    for (long shift : {-9L, -1L, 0L, 1L, 8L, 33L, 100L}) {
      std::vector<unsigned char> got(pattern), want(pattern);
      const size_t from = 80, to = static_cast<size_t>(80 + shift);
      copyElements(DataType::kUint8, got.data() + to, got.data() + from, len, nullptr,
                   Store::kCached);
      std::memmove(want.data() + to, want.data() + from, len);
      ASSERT_EQ(got, want) << "len " << len << " shift " << shift;
    }
  // Typed counts: 3 floats are 12 bytes.
  const float in[3] = {1.5f, -2.0f, 3.25f};
  float out[3] = {};
  copyElements(DataType::kFloat32, out, in, 3, nullptr, Store::kStreaming);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], in[i]);
}

TEST(ReducePublicTest, StreamingReduceMatchesCached) {
  const size_t n = 10007;
  std::vector<float> a(n), b(n), cached(n + 16), streamed(n + 16);
  for (size_t i = 0; i < n; ++i)
    a[i] = static_cast<float>(i % 251), b[i] = static_cast<float>(i % 97);
  for (size_t off : {size_t(0), size_t(1), size_t(5)}) {
    reduce(DataType::kFloat32, RedOp::kSum, cached.data() + off, a.data(), false, b.data(), false,
           n, nullptr);
    reduce(DataType::kFloat32, RedOp::kSum, streamed.data() + off, a.data(), false, b.data(), false,
           n, nullptr, Store::kStreaming);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(streamed[off + i], cached[off + i]) << i;
  }
}

}  // namespace
}  // namespace weft
