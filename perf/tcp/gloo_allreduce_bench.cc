// Gloo's allreduce algorithms over its TCP transport, one rank per process, for comparison with
// Weft on the same (possibly namespaced and shaped) network in the same run. Ranks are placed by
// weftrun (or anything setting WEFT_RANK / WEFT_WORLD_SIZE) and meet in a Gloo FileStore next to
// WEFT_ID_FILE (or in GLOO_STORE), so they may live in different network namespaces.
//
//   gloo_allreduce_bench [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS] [-w WARMUP]
//                        [-a ring,ring_chunked,halving_doubling,bcube,new_ring,new_bcube]
//
// Each rank binds Gloo to the first non-loopback IPv4 address of its namespace (GLOO_HOST
// overrides). Prints one row per (algorithm, size): time = slowest rank's mean, algbw, busbw
// (nccl-tests' allreduce factor 2(n-1)/n) and #wrong from an exact check after timing.
#include <arpa/inet.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string firstAddress() {
  if (const char* h = std::getenv("GLOO_HOST")) return h;
  ifaddrs* list = nullptr;
  std::string out = "127.0.0.1";
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    auto* a = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if (ntohl(a->sin_addr.s_addr) >> 24 == 127) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    out = text;
    break;
  }
  freeifaddrs(list);
  return out;
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<size_t>(v);
}

using Clock = std::chrono::steady_clock;

// The slowest rank's value, over a context of its own so it never mixes with the benchmark's.
double maxAll(const std::shared_ptr<gloo::Context>& ctx, double v) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(
      static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<double>));
  opts.setTag(7);
  gloo::allreduce(opts);
  return v;
}

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions b(ctx);
  b.setTag(9);
  gloo::barrier(b);
}

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 1 << 20, maxBytes = 64 << 20;
  double factor = 4;
  int iters = 5, warmup = 2;
  std::string algos = "ring,ring_chunked,halving_doubling,bcube,new_ring,new_bcube";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "-b")
      minBytes = parseBytes(argv[i + 1]);
    else if (a == "-e")
      maxBytes = parseBytes(argv[i + 1]);
    else if (a == "-f")
      factor = std::atof(argv[i + 1]);
    else if (a == "-n")
      iters = std::atoi(argv[i + 1]);
    else if (a == "-w")
      warmup = std::atoi(argv[i + 1]);
    else if (a == "-a")
      algos = argv[i + 1];
    else {
      std::fprintf(stderr, "gloo_allreduce_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const char* rankText = std::getenv("WEFT_RANK");
  const char* sizeText = std::getenv("WEFT_WORLD_SIZE");
  if (!rankText || !sizeText) {
    std::fprintf(stderr, "gloo_allreduce_bench: run under weftrun (WEFT_RANK, WEFT_WORLD_SIZE)\n");
    return 2;
  }
  const int rank = std::atoi(rankText), n = std::atoi(sizeText);
  std::string storeDir;
  if (const char* s = std::getenv("GLOO_STORE")) {
    storeDir = s;
  } else if (const char* f = std::getenv("WEFT_ID_FILE")) {
    storeDir = std::string(f) + ".gloo";
  } else {
    std::fprintf(stderr, "gloo_allreduce_bench: set GLOO_STORE or WEFT_ID_FILE\n");
    return 2;
  }
  if (rank == 0) mkdir(storeDir.c_str(), 0700);
  while (access(storeDir.c_str(), W_OK) != 0) usleep(10000);

  gloo::transport::tcp::attr attr;
  attr.hostname = firstAddress();
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore files(storeDir);
  gloo::rendezvous::PrefixStore benchStore("bench", files), ctrlStore("ctrl", files);
  auto bench = std::make_shared<gloo::rendezvous::Context>(rank, n);
  bench->connectFullMesh(benchStore, dev);
  auto ctrl = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctrl->connectFullMesh(ctrlStore, dev);
  std::shared_ptr<gloo::Context> ctx = bench, cctx = ctrl;

  if (rank == 0) {
    std::printf("# gloo allreduce, %d ranks, float sum, TCP on %s (rank 0)\n", n,
                attr.hostname.c_str());
    std::printf("# %10s %18s %12s %8s %8s %7s\n", "size(B)", "algorithm", "time(us)", "algbw",
                "busbw", "#wrong");
  }
  std::stringstream list(algos);
  std::string algo;
  while (std::getline(list, algo, ',')) {
    for (size_t bytes = minBytes; bytes <= maxBytes; bytes = static_cast<size_t>(bytes * factor)) {
      const size_t count = std::max<size_t>(1, bytes / sizeof(float));
      std::vector<float> buf(count);
      std::vector<float*> ptrs = {buf.data()};
      std::unique_ptr<gloo::Algorithm> legacy;
      if (algo == "ring")
        legacy.reset(new gloo::AllreduceRing<float>(ctx, ptrs, int(count)));
      else if (algo == "ring_chunked")
        legacy.reset(new gloo::AllreduceRingChunked<float>(ctx, ptrs, int(count)));
      else if (algo == "halving_doubling")
        legacy.reset(new gloo::AllreduceHalvingDoubling<float>(ctx, ptrs, int(count)));
      else if (algo == "bcube")
        legacy.reset(new gloo::AllreduceBcube<float>(ctx, ptrs, int(count)));
      else if (algo != "new_ring" && algo != "new_bcube") {
        if (rank == 0) std::fprintf(stderr, "unknown algorithm %s\n", algo.c_str());
        return 2;
      }
      auto once = [&] {
        if (legacy) {
          legacy->run();
          return;
        }
        gloo::AllreduceOptions opts(ctx);
        opts.setAlgorithm(algo == "new_bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                              : gloo::AllreduceOptions::Algorithm::RING);
        opts.setOutput(buf.data(), count);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(1);
        gloo::allreduce(opts);
      };
      for (int i = 0; i < warmup; ++i) once();
      barrier(cctx);
      auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) once();
      double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
      us = maxAll(cctx, us);
      // Exact check: small integers sum exactly in float.
      for (size_t i = 0; i < count; ++i) buf[i] = float((rank + i) % 5);
      once();
      double wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += float((r + i) % 5);
        wrong += buf[i] != want;
      }
      wrong = maxAll(cctx, wrong);
      if (rank == 0) {
        const double algbw = count * sizeof(float) / us / 1e3;
        std::printf("  %10zu %18s %12.1f %8.3f %8.3f %7.0f\n", count * sizeof(float), algo.c_str(),
                    us, algbw, algbw * 2.0 * (n - 1) / n, wrong);
        std::fflush(stdout);
      }
    }
  }
  barrier(cctx);
  return 0;
}
