#include "src/cuda/launch_meeting.h"

#include <utility>

namespace weft::cuda {

bool LaunchMeeting::open(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(seq);
  return it != tables_.end() && !it->second.launched && !it->second.failed;
}

Status LaunchMeeting::arrive(const DriverApi& api, uint64_t seq, std::vector<MeetingPart> parts,
                             size_t expected, std::chrono::milliseconds timeout,
                             const std::string& cause, const LaunchMeeting::Launcher& launch,
                             std::string* why) {
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
    const Status st = launch(t.parts, &t.why);
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
