// The machine's memory limits for perf/compare: memcpy and `a[i] += b[i]` (float32) over a
// 256 MiB buffer, split between 1 and 2 threads, best of N repetitions.
//
// memcpy: copy_GBps = bytes copied per second; traffic_GBps = bytes read + bytes written per
// second = 2 x copied (the nominal count: a cached store that first reads the line would add a
// third pass, glibc's non-temporal stores for large copies avoid it).
// reduce: bw_GBps = bytes of `a` per second; traffic_GBps = read a, read b, write a = 3 x that.
//
// copyat: the copy ceiling at smaller footprints, where caches help: 2 threads, each copying F
// bytes from its own source to its own destination over and over (F = 1 MiB .. the -s size,
// powers of 2), with cached stores (memcpy) and with non-temporal stores; copy_GBps = both
// threads' bytes copied per second, the better method's. A collective whose ranks must copy C
// bytes in all at a footprint of F per core cannot finish faster than C / copy_GBps(F).
//
// Output: one "@mem" line per test and thread count (copyat: per footprint), "#" lines for people.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024.0;
  if (end && (*end == 'M' || *end == 'm')) v *= 1024.0 * 1024;
  if (end && (*end == 'G' || *end == 'g')) v *= 1024.0 * 1024 * 1024;
  return size_t(v);
}

void reduceInto(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; i++) a[i] += b[i];
}

// Runs body(first, count) over [0, n) split evenly between `threads` threads; returns seconds.
template <typename Body>
double timeSplit(int threads, size_t n, Body body) {
  std::vector<std::thread> workers;
  double t = nowSeconds();
  size_t per = n / threads;
  for (int i = 1; i < threads; i++)
    workers.emplace_back(body, per * i, i + 1 == threads ? n - per * i : per);
  body(size_t(0), threads == 1 ? n : per);
  for (auto& w : workers) w.join();
  return nowSeconds() - t;
}

// Whole 64-byte lines with non-temporal stores (no read-for-ownership); buffers are 64-aligned.
void streamCopy(char* d, const char* s, size_t bytes) {
#ifdef __AVX__
  for (size_t i = 0; i + 64 <= bytes; i += 64) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
  }
#else
  for (size_t i = 0; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
#endif
  _mm_sfence();
}

// Both threads' bytes copied per second, best of `reps`: each thread copies `footprint` bytes
// between buffers of its own (first touched by itself) for about 40 ms per repetition.
double copyAt(size_t footprint, bool streaming, int reps) {
  const int threads = 2;
  const size_t iters = std::max<size_t>(2, (size_t(80) << 20) / footprint);
  double best = 0;
  for (int r = 0; r < reps; r++) {
    std::atomic<int> ready{0};
    std::vector<double> seconds(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; t++)
      workers.emplace_back([&, t] {
        char* src = static_cast<char*>(std::aligned_alloc(64, footprint));
        char* dst = static_cast<char*>(std::aligned_alloc(64, footprint));
        std::memset(src, t + 1, footprint);
        std::memset(dst, 0, footprint);
        ready.fetch_add(1);
        while (ready.load() < threads) std::this_thread::yield();
        double t0 = nowSeconds();
        for (size_t i = 0; i < iters; i++) {
          if (streaming)
            streamCopy(dst, src, footprint);
          else
            std::memcpy(dst, src, footprint);
        }
        seconds[t] = nowSeconds() - t0;
        std::free(src);
        std::free(dst);
      });
    for (auto& w : workers) w.join();
    best = std::max(best, threads * footprint * double(iters) /
                              *std::max_element(seconds.begin(), seconds.end()) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 256u << 20;
  int reps = 5;
  std::vector<int> threadCounts{1, 2};
  auto usage = [&]() {
    std::fprintf(stderr, "usage: %s [-s bytes (256M)] [-r reps (5)] [-t threads (1 and 2)]\n",
                 argv[0]);
    return 2;
  };
  if (argc % 2 == 0) return usage();
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "-s") {
      bytes = parseBytes(argv[i + 1]);
    } else if (a == "-r") {
      reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "-t") {
      threadCounts = {std::max(1, std::atoi(argv[i + 1]))};
    } else {
      return usage();
    }
  }
  const size_t n = bytes / sizeof(float);
  bytes = n * sizeof(float);
  std::vector<float> src(n), dst(n), a(n), b(n);
  // First touch by the threads that use them (2 halves), values that stay finite under +=.
  timeSplit(2, n, [&](size_t first, size_t count) {
    for (size_t i = first; i < first + count; i++) {
      src[i] = float(i & 255);
      dst[i] = 0;
      a[i] = 0;
      b[i] = 1;
    }
  });
  std::printf("# mem_bench bytes=%zu reps=%d (best of reps; GB = 1e9 bytes)\n", bytes, reps);
  for (int threads : threadCounts) {
    double best = 1e30;
    for (int r = 0; r < reps; r++)
      best = std::min(best, timeSplit(threads, n, [&](size_t first, size_t count) {
                        std::memcpy(dst.data() + first, src.data() + first, count * sizeof(float));
                      }));
    if (std::memcmp(dst.data(), src.data(), bytes) != 0) {
      std::fprintf(stderr, "memcpy check failed\n");
      return 1;
    }
    double copy = bytes / best / 1e9;
    std::printf(
        "@mem test=memcpy threads=%d bytes=%zu reps=%d time_us=%.1f copy_GBps=%.3f "
        "traffic_GBps=%.3f\n",
        threads, bytes, reps, best * 1e6, copy, 2 * copy);
  }
  for (int threads : threadCounts) {
    double best = 1e30;
    for (int r = 0; r < reps; r++)
      best = std::min(best, timeSplit(threads, n, [&](size_t first, size_t count) {
                        reduceInto(a.data() + first, b.data() + first, count);
                      }));
    double bw = bytes / best / 1e9;
    std::printf(
        "@mem test=reduce threads=%d bytes=%zu reps=%d time_us=%.1f bw_GBps=%.3f "
        "traffic_GBps=%.3f\n",
        threads, bytes, reps, best * 1e6, bw, 3 * bw);
  }
  for (size_t f = size_t(1) << 20; f <= bytes; f *= 2) {
    double cached = copyAt(f, false, reps), streamed = copyAt(f, true, reps);
    double copy = std::max(cached, streamed);
    std::printf(
        "@mem test=copyat threads=2 bytes=%zu reps=%d copy_GBps=%.3f traffic_GBps=%.3f "
        "cached_GBps=%.3f streamed_GBps=%.3f\n",
        f, reps, copy, 2 * copy, cached, streamed);
  }
  std::fflush(stdout);
  return 0;
}
