#include "src/cuda/device_calls.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include "src/common/log.h"
#include "src/exec/host_stream.h"

namespace weft::cuda {
namespace {

using cuda::CuDevicePtr;
using cuda::CuResult;
using cuda::CuStream;

// Staging ranges start on this boundary (the copy engines' and the reduction kernels' liking).
constexpr size_t kStagingAlign = 256;
// The job's flag sits first in its block, alone on its line.
constexpr size_t kFlagBytes = 64;

// Pinned host memory the device can address: a job's flag and its staged ranges.
struct StagingBlock {
  char* host = nullptr;
  size_t bytes = 0;
  CuDevicePtr flag = 0;  // the device's address of the block's first word
};

// One device range a job stages, merged from its calls' buffers.
struct Range {
  uintptr_t device = 0;
  uint64_t bytes = 0;
  bool read = false;     // copied to the host before the calls run
  bool written = false;  // copied back after
  size_t at = 0;         // offset in the staging block
};

struct Job {
  std::shared_ptr<DeviceCallState::Shared> shared;
  std::shared_ptr<exec::HostStream> worker;
  HostRunner runHost = nullptr;
  std::vector<Call> hostCalls;
  StagingBlock block;
  bool persistent = false;  // captured into a graph: replayed, so never recycled
  std::atomic<uint32_t>& flag() { return *reinterpret_cast<std::atomic<uint32_t>*>(block.host); }
};

std::string cudaFailure(const cuda::DriverApi& api, const char* what, CuResult rc) {
  return std::string(what) + " failed: " + cuda::resultText(&api, rc);
}

}  // namespace

struct DeviceCallState::Shared {
  const cuda::DriverApi* api = nullptr;
  Tuning tuning;
  int rank = 0;
  std::mutex mu;
  std::condition_variable idle;
  bool alive = true;
  int inFlight = 0;  // jobs queued on streams and not finished (persistent ones excluded)
  std::vector<StagingBlock> free;
  std::vector<std::unique_ptr<Job>> persistent;
  std::map<void*, std::shared_ptr<exec::HostStream>> workers;

  // A free block of at least `bytes`, or a new one.
  Status takeBlock(size_t bytes, StagingBlock* out, std::string* why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto best = free.end();
      for (auto it = free.begin(); it != free.end(); ++it)
        if (it->bytes >= bytes && (best == free.end() || it->bytes < best->bytes)) best = it;
      if (best != free.end()) {
        *out = *best;
        free.erase(best);
        return Status::kSuccess;
      }
    }
    void* host = nullptr;
    // A call made while its stream is captured allocates too: relaxed capture mode on this
    // thread for the allocation, as a global-mode capture would otherwise refuse it.
    int mode = cuda::kCuStreamCaptureModeRelaxed;
    const bool exchanged = api->threadExchangeStreamCaptureMode &&
                           api->threadExchangeStreamCaptureMode(&mode) == cuda::kCuSuccess;
    CuResult rc = api->memHostAlloc(&host, bytes,
                                    cuda::kCuMemHostAllocPortable | cuda::kCuMemHostAllocDeviceMap);
    if (exchanged) api->threadExchangeStreamCaptureMode(&mode);
    if (rc != cuda::kCuSuccess) {
      *why = cudaFailure(*api, "cuMemHostAlloc of the staging buffer", rc);
      return Status::kSystemError;
    }
    CuDevicePtr flag = 0;
    rc = api->memHostGetDevicePointer(&flag, host, 0);
    if (rc != cuda::kCuSuccess) {
      api->memFreeHost(host);
      *why = cudaFailure(*api, "cuMemHostGetDevicePointer of the staging buffer", rc);
      return Status::kSystemError;
    }
    *out = StagingBlock{static_cast<char*>(host), bytes, flag};
    return Status::kSuccess;
  }

  std::shared_ptr<exec::HostStream> workerFor(void* stream) {
    std::lock_guard<std::mutex> lock(mu);
    auto& w = workers[stream];
    if (!w) w = std::make_shared<exec::HostStream>(tuning);
    return w;
  }
};

namespace {

void raise(Job* job) { job->flag().store(1, std::memory_order_release); }

// Host function on the stream, after the copies to the host: hands the job to its worker. Makes
// no CUDA call (host functions may not).
void startJob(void* data) {
  Job* job = static_cast<Job*>(data);
  DeviceCallState::Shared& s = *job->shared;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.alive) {
      raise(job);  // the communicator is gone: let the stream go on
      return;
    }
  }
  std::string why;
  const Status st = job->worker->enqueue(
      [job](std::string* msg) {
        Status result = Status::kInternalError;
        try {
          result = job->runHost(job->hostCalls, msg);
        } catch (const std::exception& e) {
          *msg = e.what();
        }
        raise(job);
        return result;
      },
      &why);
  if (st != Status::kSuccess) {
    WEFT_WARN(INIT, "rank %d: a call on device memory could not start: %s", s.rank, why.c_str());
    raise(job);
  }
}

// Host function on the stream, after the copies back: the staging block is free again.
void finishJob(void* data) {
  std::unique_ptr<Job> job(static_cast<Job*>(data));
  DeviceCallState::Shared& s = *job->shared;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.alive) s.free.push_back(job->block);  // else left allocated: no CUDA call here
  --s.inFlight;
  s.idle.notify_all();
}

// The ranges `calls` read and write, merged where they overlap (an in-place call's send buffer
// lies inside its receive buffer).
std::vector<Range> stagedRanges(const std::vector<Call>& calls, BufferUser useOf) {
  std::vector<Range> ranges;
  for (const Call& c : calls) {
    const BufferUse use = useOf(c);
    if (use.sendBytes > 0)
      ranges.push_back({reinterpret_cast<uintptr_t>(c.send), use.sendBytes, true, false});
    if (use.recvBytes > 0)
      ranges.push_back({reinterpret_cast<uintptr_t>(c.recv), use.recvBytes, false, true});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.device < b.device; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (!merged.empty() && r.device < merged.back().device + merged.back().bytes) {
      Range& m = merged.back();
      m.bytes = std::max(m.bytes, r.device + r.bytes - m.device);
      m.read |= r.read;
      m.written |= r.written;
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// Where device address `p` of a staged range lies in the staging block.
void* staged(const std::vector<Range>& ranges, const StagingBlock& block, const void* p) {
  if (!p) return nullptr;
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const Range& r : ranges)
    if (a >= r.device && a < r.device + r.bytes) return block.host + r.at + (a - r.device);
  return nullptr;  // a buffer this rank does not touch
}

}  // namespace

DeviceCallState::DeviceCallState(const cuda::DriverApi& api, const Tuning& tuning, int rank)
    : shared_(std::make_shared<Shared>()) {
  shared_->api = &api;
  shared_->tuning = tuning;
  shared_->rank = rank;
}

DeviceCallState::~DeviceCallState() {
  Shared& s = *shared_;
  std::map<void*, std::shared_ptr<exec::HostStream>> workers;
  bool drained = false;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    drained = s.idle.wait_for(lock, s.tuning.timeout, [&] { return s.inFlight == 0; });
    if (!drained)
      WEFT_WARN(INIT,
                "rank %d: %d calls on device memory still wait on their streams at destroy; "
                "their staging stays allocated",
                s.rank, s.inFlight);
    s.alive = false;
    workers.swap(s.workers);
  }
  workers.clear();  // joins the workers (each finishes the job it runs)
  std::lock_guard<std::mutex> lock(s.mu);
  for (const StagingBlock& b : s.free) s.api->memFreeHost(b.host);
  s.free.clear();
  for (auto& job : s.persistent) s.api->memFreeHost(job->block.host);
  s.persistent.clear();
}

Status DeviceCallState::launch(std::vector<Call> calls, HostRunner runHost, BufferUser useOf,
                               std::string* why) {
  Shared& s = *shared_;
  const cuda::DriverApi& api = *s.api;
  auto stream = static_cast<CuStream>(calls.front().stream);
  std::vector<Range> ranges = stagedRanges(calls, useOf);
  size_t bytes = kFlagBytes;
  for (Range& r : ranges) {
    r.at = bytes;
    bytes += (r.bytes + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  }
  auto job = std::make_unique<Job>();
  job->shared = shared_;
  job->runHost = runHost;
  if (Status st = s.takeBlock(bytes, &job->block, why); st != Status::kSuccess) return st;
  job->flag().store(0, std::memory_order_relaxed);
  job->worker = s.workerFor(calls.front().stream);
  for (Call c : calls) {
    c.send = staged(ranges, job->block, c.send);
    c.recv = staged(ranges, job->block, c.recv);
    c.stream = nullptr;
    c.device = false;
    job->hostCalls.push_back(c);
  }
  int capture = cuda::kCuStreamCaptureStatusNone;
  CuResult rc = api.streamIsCapturing(stream, &capture);
  job->persistent = rc == cuda::kCuSuccess && capture != cuda::kCuStreamCaptureStatusNone;

  // From the first operation queued on, the job belongs to the stream: it is never freed here.
  Job* queued = job.release();
  auto enqueueFailed = [&](const char* what) {
    *why = cudaFailure(api, what, rc) + " (queueing a call on device memory)";
    std::lock_guard<std::mutex> lock(s.mu);
    s.persistent.emplace_back(queued);  // kept: the stream may still run what was queued
    return Status::kUnhandledCudaError;
  };
  for (const Range& r : ranges)
    if (r.read && (rc = api.memcpyDtoHAsync(queued->block.host + r.at, r.device, r.bytes,
                                            stream)) != cuda::kCuSuccess)
      return enqueueFailed("cuMemcpyDtoHAsync");
  if ((rc = api.launchHostFunc(stream, startJob, queued)) != cuda::kCuSuccess)
    return enqueueFailed("cuLaunchHostFunc");
  if ((rc = api.streamWaitValue32(stream, queued->block.flag, 1, cuda::kCuStreamWaitValueEq)) !=
      cuda::kCuSuccess)
    return enqueueFailed("cuStreamWaitValue32");
  for (const Range& r : ranges)
    if (r.written && (rc = api.memcpyHtoDAsync(r.device, queued->block.host + r.at, r.bytes,
                                               stream)) != cuda::kCuSuccess)
      return enqueueFailed("cuMemcpyHtoDAsync");
  if ((rc = api.streamWriteValue32(stream, queued->block.flag, 0,
                                   cuda::kCuStreamWriteValueDefault)) != cuda::kCuSuccess)
    return enqueueFailed("cuStreamWriteValue32");
  if (queued->persistent) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.persistent.emplace_back(queued);
    return Status::kSuccess;
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.inFlight;
  }
  if ((rc = api.launchHostFunc(stream, finishJob, queued)) != cuda::kCuSuccess) {
    std::lock_guard<std::mutex> lock(s.mu);
    --s.inFlight;
    s.persistent.emplace_back(queued);
    *why = cudaFailure(api, "cuLaunchHostFunc", rc) + " (queueing a call on device memory)";
    return Status::kUnhandledCudaError;
  }
  return Status::kSuccess;
}

}  // namespace weft::cuda
