#include "src/cuda/launch_meeting.h"

#include <algorithm>

#include "src/cuda/device_kernels.h"
#include "src/cuda/device_world.h"

namespace weft::cuda {

bool LaunchMeeting::open(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(seq);
  return it != tables_.end() && !it->second.launched && !it->second.failed;
}

Status LaunchMeeting::launch(const DriverApi& api, Table& t, std::string* why) {
  std::sort(t.parts.begin(), t.parts.end(),
            [](const MeetingPart& a, const MeetingPart& b) { return a.commRank < b.commRank; });
  InterpLaunch p;
  for (const MeetingPart& part : t.parts) {
    p.args[p.ranks] = part.args;
    p.firstBlock[p.ranks + 1] = p.firstBlock[p.ranks] + part.lanes;
    ++p.ranks;
  }
  // The kernel goes on the last arriver's stream, after every part's work queued before the call
  // (its ready event) and every rank's last launch on any other stream.
  const CuStream stream = t.parts.back().stream;
  CuResult rc = kCuSuccess;
  for (const MeetingPart& part : t.parts) {
    if (rc == kCuSuccess && part.stream != stream) rc = api.streamWaitEvent(stream, part.ready, 0);
    if (const std::shared_ptr<LaunchDone> last = part.rank->lastLaunch();
        rc == kCuSuccess && last && last->stream != stream && !last->finished())
      rc = api.streamWaitEvent(stream, last->event, 0);
  }
  DeviceKernelRank& front = *t.parts.front().rank;
  const ContextScope scope(api, front.context());
  if (rc == kCuSuccess) rc = front.module().launch(p, stream, front.threads());
  auto done = std::make_shared<LaunchDone>();
  done->api = &api;
  done->stream = stream;
  for (const MeetingPart& part : t.parts) {
    done->units.emplace_back(part.commRank, part.seq);
    done->keep.push_back(part.ready);
  }
  if (rc == kCuSuccess) rc = api.eventCreate(&done->event, kCuEventDisableTiming);
  if (rc == kCuSuccess) rc = api.eventRecord(done->event, stream);
  // Later work on every other part's stream comes after the kernel.
  std::vector<CuStream> waited{stream};
  for (const MeetingPart& part : t.parts)
    if (rc == kCuSuccess && std::find(waited.begin(), waited.end(), part.stream) == waited.end()) {
      rc = api.streamWaitEvent(part.stream, done->event, 0);
      waited.push_back(part.stream);
    }
  if (rc != kCuSuccess) {
    *why = "launching the device interpreter for the ranks of this process on this GPU failed: " +
           resultText(&api, rc);
    return Status::kUnhandledCudaError;
  }
  for (const MeetingPart& part : t.parts) part.rank->committed(done, true);
  return Status::kSuccess;
}

Status LaunchMeeting::arrive(const DriverApi& api, uint64_t seq, std::vector<MeetingPart> parts,
                             size_t expected, std::chrono::milliseconds timeout,
                             const std::string& cause, std::string* why) {
  std::vector<int> mine;
  for (const MeetingPart& part : parts) mine.push_back(part.commRank);
  std::unique_lock<std::mutex> lock(mu_);
  Table& t = tables_[seq];
  ++t.inside;
  const auto leave = [&](Status st) {
    if (st != Status::kSuccess) *why = t.why;
    if (--t.inside == 0 && (t.launched || t.failed)) tables_.erase(seq);
    return st;
  };
  if (t.failed) {
    for (MeetingPart& part : parts) api.eventDestroy(part.ready);
    return leave(Status::kInvalidUsage);
  }
  for (MeetingPart& part : parts) t.parts.push_back(std::move(part));
  if (t.parts.size() >= expected) {
    const Status st = launch(api, t, &t.why);
    (st == Status::kSuccess ? t.launched : t.failed) = true;
    cv_.notify_all();
    return leave(st);
  }
  const bool met = cv_.wait_for(lock, timeout, [&] { return t.launched || t.failed; });
  if (!met) {
    t.failed = true;
    t.why = "rank";
    for (int r : mine) t.why += " " + std::to_string(r);
    t.why +=
        ": the other ranks of this communicator in this process on this GPU did not make "
        "their call #" +
        std::to_string(seq + 1) + " within the timeout (WEFT_TIMEOUT_MS); because of " + cause +
        ", they run each call as one kernel launched when the last of them calls: call each "
        "rank from its own thread, or all of them from one thread inside "
        "ncclGroupStart/ncclGroupEnd";
    for (MeetingPart& part : t.parts) api.eventDestroy(part.ready);
    t.parts.clear();
    cv_.notify_all();
  }
  return leave(t.launched ? Status::kSuccess : Status::kInvalidUsage);
}

}  // namespace weft::cuda
