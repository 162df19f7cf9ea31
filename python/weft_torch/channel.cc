#include "python/weft_torch/channel.h"

#include <stdexcept>

namespace weft_torch {

WeftWork::WeftWork(int rank, c10d::OpType type, std::weak_ptr<Channel> channel,
                   std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      channel_(std::move(channel)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

bool WeftWork::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, limit, [this] { return completed_; })) {
      if (exception_) std::rethrow_exception(exception_);
      return true;
    }
  }
  const std::string why = "weft: " + c10d::opTypeToString(retrieveOpType()) + " timed out after " +
                          std::to_string(limit.count()) +
                          " ms (did every rank of the group call it?); the process group's "
                          "communicator was revoked, so later operations on it fail";
  if (auto channel = channel_.lock()) channel->timedOut(why);
  throw std::runtime_error(why);
}

void WeftWork::complete(std::exception_ptr error) {
  if (!error && finisher_) {
    try {
      finisher_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  finisher_ = nullptr;
  keepAlive_.clear();
  finish(error);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

Channel::Channel(const ncclUniqueId& id, int rank, int size) {
  ncclResult_t result = ncclCommInitRank(&comm_, size, id, rank);
  if (result != ncclSuccess) {
    const std::string why = describe(result, "ncclCommInitRank");
    comm_ = nullptr;
    throw std::runtime_error(why);
  }
  result = weftStreamCreate(&stream_);
  if (result != ncclSuccess) {
    const std::string why = describe(result, "weftStreamCreate");
    ncclCommDestroy(comm_);
    throw std::runtime_error(why);
  }
  completer_ = std::thread([this] { completeLoop(); });
}

Channel::~Channel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  completer_.join();
  weftStreamDestroy(stream_);
  bool failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = !brokenWhy_.empty();
  }
  if (failed)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);
}

std::string Channel::describe(ncclResult_t result, const char* what) {
  std::string text = std::string("weft: ") + what + " failed: " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm_);
  if (last && *last) text += std::string(": ") + last;
  return text;
}

void Channel::throwIfBroken() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!brokenWhy_.empty())
    throw std::runtime_error(brokenWhy_ + " (an earlier operation on this process group failed)");
}

void Channel::track(const c10::intrusive_ptr<WeftWork>& work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(work);
  }
  cv_.notify_one();
}

void Channel::beginGroup() {
  std::lock_guard<std::mutex> issue(issueMu_);
  TORCH_CHECK(!grouping_, "weft: coalescing already started on this process group");
  throwIfBroken();
  const ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) throw std::runtime_error(describe(result, "ncclGroupStart"));
  grouping_ = true;
}

void Channel::endGroup() {
  std::lock_guard<std::mutex> issue(issueMu_);
  TORCH_CHECK(grouping_, "weft: coalescing was not started on this process group");
  grouping_ = false;
  std::vector<c10::intrusive_ptr<WeftWork>> works;
  works.swap(grouped_);
  const ncclResult_t result = ncclGroupEnd();
  if (result != ncclSuccess) {
    const std::string why = describe(result, "ncclGroupEnd (coalesced operations)");
    auto error = std::make_exception_ptr(std::runtime_error(why));
    for (auto& work : works) work->complete(error);
    throw std::runtime_error(why);
  }
  for (auto& work : works) track(work);
}

void Channel::timedOut(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (brokenWhy_.empty()) brokenWhy_ = why;
  }
  if (!revoked_.exchange(true)) ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
}

void Channel::completeLoop() {
  for (;;) {
    std::deque<c10::intrusive_ptr<WeftWork>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing is left to complete
      batch.swap(pending_);
    }
    // The stream runs calls in order, so once it has drained every work of the batch (all
    // queued before they were tracked) has run. Its error is the first one since the last
    // drain; operations after a failure cannot be trusted either, so the whole batch fails.
    ncclResult_t result = weftStreamSynchronize(stream_);
    if (result == ncclSuccess) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) == ncclSuccess && async != ncclInProgress)
        result = async;
    }
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (result != ncclSuccess && brokenWhy_.empty())
        brokenWhy_ = describe(result, "a queued operation");
      if (!brokenWhy_.empty()) error = std::make_exception_ptr(std::runtime_error(brokenWhy_));
    }
    for (auto& work : batch) work->complete(error);
  }
}

}  // namespace weft_torch
