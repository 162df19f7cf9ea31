// Host streams: an ordered queue of work run asynchronously by one worker thread
// (the host-memory analogue of a cudaStream_t).
#pragma once
#include <chrono>
#include <condition_variable>
#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "src/common/error.h"

namespace weft::exec {

class HostStream {
 public:
  HostStream();
  ~HostStream();  // drains pending work first

  // Queues `fn`; it runs after everything queued before it. Its returned status and message are
  // kept as the stream's first error (later work still runs and reports its own errors).
  void enqueue(std::function<Status(std::string*)> fn);
  // Waits until the queue is empty; returns the first error seen since the last synchronize.
  Status synchronize(std::chrono::milliseconds timeout, std::string* why);
  bool idle();

  // Registry of live streams, so the API can tell a host stream from a foreign pointer.
  static bool isLive(const void* stream);

 private:
  void loop();
  // Spins (yielding) up to the spin budget while `done()` is false; true if it became true.
  template <typename Pred>
  static bool spinUntil(Pred done);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<Status(std::string*)>> queue_;
  bool busy_ = false;
  // Lock-free mirrors so the worker and synchronize() can spin before they block.
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> finished_{0};
  bool stop_ = false;
  Status error_ = Status::kSuccess;
  std::string errorText_;
  std::thread worker_;
};

}  // namespace weft::exec
