// The slot FIFO alone, without the executor or the API: one thread posts `messages` messages of
// `bytes` bytes through a FifoConnection, another receives, copies and releases each, both pinned.
// Separates what the transport costs per small message from what a whole collective call costs.
//   fifo_stream [messages [bytes [work [cpuA cpuB]]]]   (default: 2000000 8 0 0 1)
// `work`: iterations of a dependent store/load loop each side runs per message (a few cycles
// each), standing in for the rest of a call (see perf/README.md, "Where an 8 B broadcast call's
// time goes").
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "transports/shm/fifo.h"

namespace {

using weft::transport::FifoConnection;

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

void work(long iterations) {
  volatile long x = 0;
  for (long k = 0; k < iterations; ++k) x = x + k;
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

int main(int argc, char** argv) {
  const long messages = argc > 1 ? std::atol(argv[1]) : 2000000;
  const long bytes = argc > 2 ? std::atol(argv[2]) : 8;
  const long perMessage = argc > 3 ? std::atol(argv[3]) : 0;
  const int cpuA = argc > 5 ? std::atoi(argv[4]) : 0;
  const int cpuB = argc > 5 ? std::atoi(argv[5]) : 1;
  constexpr size_t kSlotBytes = 64 << 10;
  if (messages <= 0 || bytes <= 0 || static_cast<size_t>(bytes) > kSlotBytes || perMessage < 0) {
    std::fprintf(stderr,
                 "usage: fifo_stream [messages > 0 [bytes 1..65536 [work >= 0 [cpuA cpuB]]]]\n");
    return 2;
  }
  const size_t fifoBytes = weft::transport::fifoBytes(4, kSlotBytes);
  std::unique_ptr<void, AlignedFree> aToB(std::aligned_alloc(4096, fifoBytes));
  std::unique_ptr<void, AlignedFree> bToA(std::aligned_alloc(4096, fifoBytes));
  weft::transport::fifoInit(aToB.get());
  weft::transport::fifoInit(bToA.get());
  FifoConnection::Params sp, rp;
  sp.outMem = rp.inMem = aToB.get();
  sp.inMem = rp.outMem = bToA.get();
  sp.slotBytes = rp.slotBytes = kSlotBytes;
  FifoConnection sender(sp), receiver(rp);

  std::unique_ptr<char[]> src(new char[bytes]), dst(new char[bytes]);
  std::memset(src.get(), 1, bytes);
  bool pinned = true;
  long wrong = 0;
  std::thread peer([&] {
    if (!pin(cpuB)) pinned = false;
    for (long i = 0; i < messages; ++i) {
      uint32_t got = 0, tag = 0;
      const void* p;
      while (!(p = receiver.recvSlot(&got, &tag))) weft::cpuRelax();
      if (got != static_cast<uint32_t>(bytes) || tag != static_cast<uint32_t>(i)) ++wrong;
      std::memcpy(dst.get(), p, bytes);
      receiver.release();
      work(perMessage);
    }
  });
  if (!pin(cpuA)) pinned = false;
  long full = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < messages; ++i) {
    void* p;
    while (!(p = sender.sendSlotFor(bytes))) {
      ++full;
      weft::cpuRelax();
    }
    std::memcpy(p, src.get(), bytes);
    sender.post(static_cast<uint32_t>(bytes), static_cast<uint32_t>(i));
    work(perMessage);
  }
  peer.join();
  const auto end = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(end - start).count() / messages;
  std::printf(
      "%ld B messages, work %ld, cpus %d and %d%s: %.1f ns a message; sender found the "
      "FIFO full %ld times%s\n",
      bytes, perMessage, cpuA, cpuB, pinned ? "" : " (not pinned)", ns, full,
      wrong ? " -- WRONG sizes or tags received" : "");
  return wrong ? 1 : 0;
}
