#include "src/exec/host_stream.h"

#include <sched.h>

#include <set>

#include "src/common/clock.h"

namespace weft::exec {
namespace {
std::mutex gLiveMu;
std::set<const void*>& live() {
  static std::set<const void*> s;
  return s;
}
}  // namespace

template <typename Pred>
bool HostStream::spinUntil(Pred done) {
  // Short: a stream thread that spins long starves ranks sharing its core.
  uint64_t start = nowNs();
  while (!done()) {
    if (nowNs() - start > spinNs_.load(std::memory_order_relaxed)) return false;
    sched_yield();
  }
  return true;
}

HostStream::HostStream(const Tuning& tuning) : spinNs_(tuning.spinNs), timeout_(tuning.timeout) {
  worker_ = std::thread([this] { loop(); });
  std::lock_guard<std::mutex> lock(gLiveMu);
  live().insert(this);
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    live().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

bool HostStream::isLive(const void* stream) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  return live().count(stream) != 0;
}

Status HostStream::enqueue(std::function<Status(std::string*)> fn, std::string* why) {
  return enqueue(std::move(fn), why, timeout_);
}

Status HostStream::enqueue(std::function<Status(std::string*)> fn, std::string* why,
                           const Tuning& tuning) {
  spinNs_.store(tuning.spinNs, std::memory_order_relaxed);
  return enqueue(std::move(fn), why, tuning.timeout);
}

Status HostStream::enqueue(std::function<Status(std::string*)> fn, std::string* why,
                           std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      ++roomWaiters_;
      const bool room =
          room_.wait_for(lock, timeout, [this] { return queue_.size() < kMaxQueued; });
      --roomWaiters_;
      if (!room) {
        *why = "host stream: " + std::to_string(queue_.size()) +
               " calls queued and none finished within " + std::to_string(timeout.count()) +
               " ms (is a peer missing the matching operation?)";
        return Status::kInternalError;
      }
    }
    queue_.push_back(std::move(fn));
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  return Status::kSuccess;
}

void HostStream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (queue_.empty() && !stop_) {
      // Back-to-back launches are the common case: look for the next one before sleeping.
      lock.unlock();
      spinUntil([this] {
        return queued_.load(std::memory_order_acquire) != finished_.load(std::memory_order_relaxed);
      });
      lock.lock();
    }
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and drained
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    if (roomWaiters_ > 0) room_.notify_one();
    busy_ = true;
    lock.unlock();
    std::string why;
    Status st;
    try {
      st = fn(&why);
    } catch (const Error& e) {
      st = e.code();
      why = e.what();
    }
    lock.lock();
    busy_ = false;
    finished_.fetch_add(1, std::memory_order_release);
    if (st != Status::kSuccess && error_ == Status::kSuccess) {
      error_ = st;
      errorText_ = why;
    }
    // Synchronizers wait for a drained queue: waking them after every call would take the core
    // from this thread (and from the ranks sharing it) once per call.
    if (queue_.empty()) cv_.notify_all();
  }
}

Status HostStream::synchronize(std::chrono::milliseconds timeout, std::string* why) {
  // Spin only for the last call in flight: a synchronizer spinning through a long queue takes
  // the core from the stream thread (and from ranks that share it) for no gain.
  if (queued_.load(std::memory_order_relaxed) - finished_.load(std::memory_order_acquire) <= 1)
    spinUntil([this] {
      return finished_.load(std::memory_order_acquire) == queued_.load(std::memory_order_relaxed);
    });
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; })) {
    *why = "host stream did not drain within " + std::to_string(timeout.count()) + " ms";
    return Status::kInternalError;
  }
  Status st = error_;
  *why = errorText_;
  error_ = Status::kSuccess;
  errorText_.clear();
  return st;
}

bool HostStream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

}  // namespace weft::exec
