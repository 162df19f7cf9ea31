// The fake stream driver's scheduler: see the top of fake_stream_driver.cc.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "tests/unit/cuda/fake_device_memory.h"
#include "tests/unit/cuda/fake_stream.h"

namespace weft::fake::stream {

std::chrono::milliseconds syncLimit() {
  const char* v = std::getenv("WEFT_FAKE_SYNC_LIMIT_MS");
  return std::chrono::milliseconds(v ? std::atoll(v) : 20000);
}

bool mode(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

Driver& driver() {
  static Driver* d = new Driver;  // never destroyed: streams may run while the process exits
  return *d;
}

bool isLegacy(void* handle) { return handle == nullptr || handle == reinterpret_cast<void*>(1); }

Stream* streamOf(void* handle) {
  return isLegacy(handle) ? driver().legacy.get() : static_cast<Stream*>(handle);
}

Stream* makeStream(bool blocking) {
  auto* s = new Stream(blocking);
  Driver& d = driver();
  std::lock_guard<std::mutex> lock(d.mu);
  d.streams.insert(s);
  return s;
}

void destroyStream(Stream* s) {
  {
    Driver& d = driver();
    std::lock_guard<std::mutex> lock(d.mu);
    d.streams.erase(s);
  }
  delete s;  // runs what is queued first, as CUDA does
}

void reportDeadlock(const char* what) {
  driver().deadlocks.fetch_add(1);
  std::fprintf(stderr, "fake CUDA driver: %s waited past WEFT_FAKE_SYNC_LIMIT_MS: a deadlock\n",
               what);
}

Op gate(Stream* s, Op op, bool waits) {
  Driver& d = driver();
  std::vector<std::pair<std::shared_ptr<Progress>, uint64_t>> after;
  if (mode("WEFT_FAKE_LEGACY_SYNC")) {
    if (s == d.legacy.get()) {
      std::lock_guard<std::mutex> lock(d.mu);
      for (Stream* x : d.streams)
        if (x->blocking) after.emplace_back(x->progress, x->queued());
    } else if (s->blocking) {
      after.emplace_back(d.legacy->progress, d.legacy->queued());
    }
  }
  uint64_t ticket = 0;
  if (mode("WEFT_FAKE_ONE_QUEUE")) {
    std::lock_guard<std::mutex> lock(d.queueMu);
    ticket = d.nextTicket++;
  }
  if (after.empty() && ticket == 0) return op;
  return [after = std::move(after), ticket, waits, op = std::move(op)] {
    const auto limit = syncLimit();
    for (const auto& [progress, count] : after) {
      std::unique_lock<std::mutex> lock(progress->mu);
      if (!progress->cv.wait_for(lock, limit, [&] { return progress->done >= count; }))
        reportDeadlock("an operation waiting for the legacy stream's order");
    }
    if (ticket == 0) return op();
    // Its turn in the one queue: every operation queued before it has started. One that waits
    // for an event or a value counts as started once that wait is over.
    Driver& dr = driver();
    {
      std::unique_lock<std::mutex> lock(dr.queueMu);
      if (!dr.queueCv.wait_for(lock, limit, [&] { return dr.nextStart >= ticket; }))
        reportDeadlock("an operation waiting for its turn in the one hardware queue");
    }
    if (waits) op();
    {
      std::lock_guard<std::mutex> lock(dr.queueMu);
      dr.nextStart = std::max(dr.nextStart, ticket + 1);
    }
    dr.queueCv.notify_all();
    if (!waits) op();
  };
}

void kernelBegins(int device) {
  Driver& d = driver();
  const char* lockFile = std::getenv("WEFT_FAKE_NO_MPS");
  std::unique_lock<std::mutex> lock(d.runMu);
  if (lockFile && *lockFile && d.runningHere == 0) {
    // Time-sliced contexts: this process's kernels start only once no other process's run.
    if (d.lockFd < 0) d.lockFd = open(lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    const auto deadline = std::chrono::steady_clock::now() + syncLimit();
    while (d.lockFd >= 0 && flock(d.lockFd, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        reportDeadlock("a kernel waiting for another process's kernels to end");
        break;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
  }
  ++d.runningHere;
  ++d.running[device];
}

void kernelEnds(int device) {
  Driver& d = driver();
  {
    std::lock_guard<std::mutex> lock(d.runMu);
    --d.running[device];
    if (--d.runningHere == 0 && d.lockFd >= 0) flock(d.lockFd, LOCK_UN);
  }
  d.runCv.notify_all();
}

bool synchroniseDevice(const char* what) {
  Driver& d = driver();
  const int device = weft::fake::currentDevice();
  std::unique_lock<std::mutex> lock(d.runMu);
  if (d.running[device] == 0) return true;
  d.syncHazards.fetch_add(1);
  if (d.runCv.wait_for(lock, syncLimit(), [&] { return d.running[device] == 0; })) return true;
  reportDeadlock(what);
  return false;
}

}  // namespace weft::fake::stream
