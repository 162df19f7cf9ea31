// Host streams: an ordered queue of work run asynchronously by one worker thread
// (the host-memory analogue of a cudaStream_t).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "src/common/error.h"
#include "src/common/tuning.h"

namespace weft::exec {

class HostStream {
 public:
  // `tuning` gives the stream's spin budget and the timeout of a launch into a full queue, until
  // a launch brings its own (enqueue with a Tuning).
  explicit HostStream(const Tuning& tuning);
  ~HostStream();  // drains pending work first

  // Most calls a stream holds queued. A launch beyond them waits for the oldest to finish, as a
  // full CUDA launch queue makes its launcher wait: unbounded, a rank whose peer stalled would
  // go on queueing without end, its memory growing and nothing noticing until it synchronizes.
  static constexpr size_t kMaxQueued = 1024;

  // Queues `fn`; it runs after everything queued before it. Its returned status and message are
  // kept as the stream's first error (later work still runs and reports its own errors). With
  // kMaxQueued calls queued it waits up to `timeout` for room, then fails without queueing.
  Status enqueue(std::function<Status(std::string*)> fn, std::string* why,
                 std::chrono::milliseconds timeout);
  Status enqueue(std::function<Status(std::string*)> fn, std::string* why);
  // The same for a call of a communicator with `tuning`: its timeout bounds the wait for room,
  // and its spin budget is the stream's from then on (a stream the user created has no tuning
  // of its own).
  Status enqueue(std::function<Status(std::string*)> fn, std::string* why, const Tuning& tuning);
  // Waits until the queue is empty; returns the first error seen since the last synchronize.
  Status synchronize(std::chrono::milliseconds timeout, std::string* why);
  bool idle();

  // Registry of live streams, so the API can tell a host stream from a foreign pointer.
  static bool isLive(const void* stream);

 private:
  void loop();
  // Spins (yielding) up to the spin budget while `done()` is false; true if it became true.
  template <typename Pred>
  bool spinUntil(Pred done);

  std::atomic<uint64_t> spinNs_;  // read by the worker and synchronizers while a launch sets it
  const std::chrono::milliseconds timeout_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable room_;  // a full queue's launchers wait here
  int roomWaiters_ = 0;
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
