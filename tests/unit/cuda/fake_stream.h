// The fake stream driver's streams, events, graphs and scheduler (fake_stream_driver.cc has the
// entry points; fake_stream_sched.cc the scheduling modes and the device synchronisation of
// allocations, described at the top of fake_stream_driver.cc).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace weft::fake::stream {

using CuResult = int;
using Op = std::function<void()>;
constexpr CuResult kSuccess = 0;

// How far a stream got: shared with operations of other streams that wait for it, so that it may
// go before they do.
struct Progress {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t queued = 0, done = 0;
};

// How long a wait of the scheduler or an allocation's device synchronisation lasts before it
// counts as a deadlock (WEFT_FAKE_SYNC_LIMIT_MS).
std::chrono::milliseconds syncLimit();
// Whether the scheduling mode named by environment variable `name` is on.
bool mode(const char* name);

struct Stream;
// Wraps `op` of stream `s` in the waits the scheduling modes add (see the top of the file).
Op gate(Stream* s, Op op, bool waits);

struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Op> ops;
  bool busy = false;
  bool stop = false;
  bool capturing = false;
  bool blocking = false;  // synchronises with the legacy stream (WEFT_FAKE_LEGACY_SYNC)
  std::shared_ptr<Progress> progress = std::make_shared<Progress>();
  std::vector<Op> captured;
  std::thread worker;

  explicit Stream(bool blocks = false) : blocking(blocks), worker([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !ops.empty(); });
      if (ops.empty()) return;
      Op op = std::move(ops.front());
      ops.pop_front();
      busy = true;
      lock.unlock();
      op();
      {
        std::lock_guard<std::mutex> p(progress->mu);
        ++progress->done;
      }
      progress->cv.notify_all();
      lock.lock();
      busy = false;
      cv.notify_all();
    }
  }
  // `waits`: the operation waits for something outside its stream (an event, a value): in the
  // one-queue mode it holds back what follows until that is met.
  CuResult push(Op op, bool waits = false) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (capturing) {
        captured.push_back(std::move(op));
        return kSuccess;
      }
    }
    Op gated = gate(this, std::move(op), waits);
    std::lock_guard<std::mutex> lock(mu);
    {
      std::lock_guard<std::mutex> p(progress->mu);
      ++progress->queued;
    }
    ops.push_back(std::move(gated));
    cv.notify_all();
    return kSuccess;
  }
  uint64_t queued() {
    std::lock_guard<std::mutex> p(progress->mu);
    return progress->queued;
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return ops.empty() && !busy; });
  }
  bool synchronizeFor(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, [&] { return ops.empty() && !busy; });
  }
};

// An event: the time its stream reached it, once it has.
struct Event {
  std::mutex mu;
  std::condition_variable cv;
  bool reached = true;  // an event never recorded counts as complete, as in CUDA
  std::chrono::steady_clock::time_point at{};
  // Stream operations still to use it (a record or a wait): as in CUDA, destroying an event
  // they use is allowed, and it goes once the last of them has run.
  int uses = 0;
  bool destroyed = false;
};

// The event's stream operation `use` (queued after a use++ under its lock), then the event
// itself where it was destroyed meanwhile and this was its last use.
inline void useEvent(Event* e, const std::function<void(std::unique_lock<std::mutex>&)>& use) {
  bool last = false;
  {
    std::unique_lock<std::mutex> lock(e->mu);
    use(lock);
    last = --e->uses == 0 && e->destroyed;
  }
  if (last) delete e;
}

struct Graph {
  std::vector<Op> ops;
};

constexpr int kMaxGpus = 8;

struct Driver {
  std::mutex mu;
  std::set<void*> modules;                  // loaded, not yet unloaded
  std::atomic<uint64_t> launches{0};        // kernels queued (captured ones included)
  std::atomic<uint64_t> directLaunches{0};  // of them, the direct kernel's
  std::unique_ptr<Stream> legacy = std::make_unique<Stream>();
  std::set<Stream*> streams;  // made by cuStreamCreate or the test, not yet destroyed
  // Kernels running per GPU, and this process's over all GPUs (WEFT_FAKE_NO_MPS).
  std::mutex runMu;
  std::condition_variable runCv;
  int running[kMaxGpus] = {};
  int runningHere = 0;
  int lockFd = -1;
  std::atomic<uint64_t> syncHazards{0}, deadlocks{0};
  // WEFT_FAKE_ONE_QUEUE: the next operation's place in the queue, and the next one to start.
  std::mutex queueMu;
  std::condition_variable queueCv;
  uint64_t nextTicket = 1, nextStart = 1;
};

Driver& driver();
// Stream 0 and CU_STREAM_LEGACY name the legacy stream.
bool isLegacy(void* handle);
Stream* streamOf(void* handle);
Stream* makeStream(bool blocking);
void destroyStream(Stream* s);
// A kernel of GPU `device` starts and ends (WEFT_FAKE_NO_MPS holds other processes' back).
void kernelBegins(int device);
void kernelEnds(int device);
// What a driver call that synchronises the device does first: waits for the current GPU's running
// kernels to finish. False (a deadlock reported) where they did not within the limit.
bool synchroniseDevice(const char* what);

}  // namespace weft::fake::stream
