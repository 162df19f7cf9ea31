// One Weft communicator and the host stream its operations run on, plus the thread that
// completes the torch Work objects of those operations as the stream finishes them.
#pragma once
#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "weft/weft.h"

namespace weft_torch {

class Channel;

// The Work of one operation queued on a Channel's stream. It completes asynchronously (the
// channel's completer thread marks it done once the stream has run it); wait() honours its
// timeout, and getFuture() gives the future DistributedDataParallel's comm hooks chain on.
class WeftWork : public c10d::Work {
 public:
  WeftWork(int rank, c10d::OpType type, std::weak_ptr<Channel> channel,
           std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout);

  // Runs on the completer thread after the operation succeeded, before the work reports
  // completion: copies a staged (contiguous) result back into the caller's tensors.
  void setFinisher(std::function<void()> finisher) { finisher_ = std::move(finisher); }
  // Tensors the stream reads or writes that nobody else holds (staged copies, flat buffers).
  void keepAlive(std::vector<at::Tensor> tensors) { keepAlive_ = std::move(tensors); }

  // Waits up to `timeout` (kNoTimeout: the operation's own timeout). On expiry the channel's
  // communicator is revoked, since its peers can no longer be trusted to match calls, and this
  // throws; an operation that failed rethrows its error.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void synchronize() override {}  // host memory: nothing to order against a device stream

  // Called by the completer: `error` null means the stream ran the operation successfully.
  void complete(std::exception_ptr error);

 private:
  std::weak_ptr<Channel> channel_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keepAlive_;
  std::function<void()> finisher_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class Channel {
 public:
  // Joins communicator `id` as `rank` of `size` (blocking, bounded by Weft's bootstrap timeout)
  // and creates its host stream. Throws std::runtime_error with Weft's message on failure.
  Channel(const ncclUniqueId& id, int rank, int size);
  // Completes every queued work, then frees the stream and the communicator (aborted when it
  // failed, so that nothing waits on a peer).
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Queues an operation: `enqueue(comm, stream)` makes the NCCL call(s) on the stream and
  // returns their result. Calls are queued in the order works are registered, under one lock.
  // Throws if the channel already failed or the call was refused.
  template <typename Enqueue>
  void launch(const c10::intrusive_ptr<WeftWork>& work, const char* what, Enqueue&& enqueue) {
    std::lock_guard<std::mutex> issue(issueMu_);
    throwIfBroken();
    const ncclResult_t result = enqueue(comm_, stream_);
    if (result != ncclSuccess) throw std::runtime_error(describe(result, what));
    if (grouping_)
      grouped_.push_back(work);
    else
      track(work);
  }

  // Coalescing (torch's batch_isend_irecv): the calling thread's launches until endGroup() form
  // one NCCL group, queued on the stream as one operation, so that sends and receives between
  // the same ranks cannot wait on each other. Their works are tracked once the group is queued.
  void beginGroup();
  void endGroup();

  // A wait ran out of time: marks the channel failed with `why` and revokes the communicator,
  // so the operation in flight returns at once and later ones are refused.
  void timedOut(const std::string& why);

 private:
  void throwIfBroken();
  void track(const c10::intrusive_ptr<WeftWork>& work);
  std::string describe(ncclResult_t result, const char* what);
  void completeLoop();

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::mutex issueMu_;
  // Set between beginGroup() and endGroup() (torch coalesces from one thread at a time).
  bool grouping_ = false;
  std::vector<c10::intrusive_ptr<WeftWork>> grouped_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WeftWork>> pending_;
  bool stop_ = false;
  std::string brokenWhy_;  // first failure; non-empty means every later operation fails
  std::atomic<bool> revoked_{false};
  std::thread completer_;
};

}  // namespace weft_torch
