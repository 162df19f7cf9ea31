// Queuing the device interpreter's launches for calls on device memory (launchKernels,
// src/cuda/device_kernels.h): per stream, rounds of units planned together; units whose ranks'
// kernels could not run side by side meet first (src/cuda/launch_meeting.h).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/cuda/device_kernels.h"
#include "src/cuda/device_world.h"
#include "src/cuda/launch_meeting.h"

namespace weft::cuda {

using cuda::CuResult;
using cuda::CuStream;

namespace {

// The calls of one stream, as rounds of launches: round j holds the j-th unit of every
// communicator (a collective call, or the group's point-to-point calls), planned.
struct StreamLaunches {
  CuStream stream = nullptr;
  std::vector<Communicator*> order;
  std::map<Communicator*, std::vector<std::vector<Call>>> units;
  std::map<Communicator*, DeviceKernelRank*> kernelRanks;
  struct Round {
    std::vector<DeviceKernelRank*> ranks;
    std::vector<DeviceKernelRank::Unit> planned;
  };
  std::vector<Round> rounds;
};

Status groupByStream(const std::vector<Call>& calls, const std::vector<DeviceKernelRank*>& ranks,
                     std::vector<StreamLaunches>* out, std::string* why) {
  std::vector<StreamLaunches>& streams = *out;
  std::map<Communicator*, size_t> p2pUnit;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    auto s = std::find_if(streams.begin(), streams.end(),
                          [&](const StreamLaunches& x) { return x.stream == c.stream; });
    if (s == streams.end()) {
      streams.emplace_back();
      streams.back().stream = static_cast<CuStream>(c.stream);
      s = streams.end() - 1;
    }
    auto& list = s->units[c.comm];
    if (list.empty()) s->order.push_back(c.comm);
    s->kernelRanks[c.comm] = ranks[i];
    if (c.coll == plan::Collective::kSendRecv) {
      auto it = p2pUnit.find(c.comm);
      if (it == p2pUnit.end()) {
        p2pUnit[c.comm] = list.size();
        list.push_back({c});
      } else {
        list[it->second].push_back(c);
      }
    } else {
      list.push_back({c});
    }
  }
  for (const StreamLaunches& s : streams)
    if (s.order.size() > cuda::kMaxLaunchRanks) {
      *why = "calls of " + std::to_string(s.order.size()) +
             " ranks on one stream in one group; at most " + std::to_string(cuda::kMaxLaunchRanks) +
             " ranks can share a stream";
      return Status::kInvalidUsage;
    }
  return Status::kSuccess;
}

// Prepares and queues one round on its stream.
Status launchRound(const cuda::DriverApi& api, CuStream stream, bool capturing,
                   StreamLaunches::Round& round, std::string* why) {
  cuda::InterpLaunch p;
  // The round's direct units, the ranks of one call merged into one launch.
  std::vector<std::pair<const cuda::DirectKernel*, cuda::DirectLaunch>> direct;
  for (size_t i = 0; i < round.ranks.size(); ++i) {
    if (const DeviceKernelRank::Unit& u = round.planned[i]; u.direct) {
      auto it = std::find_if(direct.begin(), direct.end(), [&](const auto& d) {
        return cuda::launchesMerge(d.second, u.launch);
      });
      if (it == direct.end())
        direct.emplace_back(&round.ranks[i]->directKernel(), u.launch);
      else
        it->second.rank[it->second.ranks++] = u.launch.rank[0];
      continue;
    }
    uint32_t l = 0;
    if (Status st = round.ranks[i]->prepare(round.planned[i], &p.args[p.ranks], &l, why);
        st != Status::kSuccess)
      return st;
    p.firstBlock[p.ranks + 1] = p.firstBlock[p.ranks] + l;
    ++p.ranks;
  }
  CuResult rc = cuda::kCuSuccess;
  // A rank's launches run one after another, as NCCL orders a communicator's calls: one on
  // another stream than the rank's last waits for that one (a graph being captured orders its
  // own nodes).
  if (!capturing)
    for (DeviceKernelRank* k : round.ranks)
      if (const std::shared_ptr<LaunchDone> last = k->lastLaunch();
          last && last->stream != stream && !last->finished() &&
          (rc = api.streamWaitEvent(stream, last->event, 0)) != cuda::kCuSuccess)
        break;
  std::shared_ptr<LaunchDone> done;
  // The stream's GPU is its ranks' (CUDA streams belong to one device).
  const ContextScope scope(api, round.ranks.front()->context());
  if (rc == cuda::kCuSuccess)
    rc = round.ranks.front()->module().launch(p, stream, round.ranks.front()->threads());
  for (const auto& [kernel, launch] : direct)
    if (rc == cuda::kCuSuccess) rc = kernel->launch(launch, stream);
  if (rc == cuda::kCuSuccess && !capturing) {
    done = std::make_shared<LaunchDone>();
    done->api = &api;
    done->stream = stream;
    rc = api.eventCreate(&done->event, cuda::kCuEventDisableTiming);
    if (rc == cuda::kCuSuccess) rc = api.eventRecord(done->event, stream);
  }
  if (rc != cuda::kCuSuccess) {
    *why = "launching the device interpreter failed: " + cuda::resultText(&api, rc);
    return Status::kUnhandledCudaError;
  }
  for (size_t i = 0; i < round.ranks.size(); ++i) {
    if (done) done->units.emplace_back(round.ranks[i]->rank(), round.ranks[i]->callNumber());
  }
  for (size_t i = 0; i < round.ranks.size(); ++i)
    round.ranks[i]->committed(done, !round.planned[i].pointToPoint);
  return Status::kSuccess;
}

// CU_STREAM_LEGACY; stream 0 is the legacy stream too (CU_STREAM_PER_THREAD is not).
bool legacyStream(CuStream s) { return s == nullptr || s == reinterpret_cast<CuStream>(1); }

// Why rank `k`'s collective unit on `stream` meets the other ranks of its process on its GPU
// (src/cuda/launch_meeting.h), or "" where it launches with the ranks of its own call.
std::string meetCause(DeviceKernelRank& k, CuStream stream) {
  if (k.ranksHere() < 2) return "";
  if (k.maxConnections() == 1) return "CUDA_DEVICE_MAX_CONNECTIONS=1";
  if (legacyStream(stream)) return "a call on the legacy NULL stream";
  if (k.world().meeting().open(k.callNumber()))
    return "another rank of this process on this GPU calling on the legacy NULL stream or under "
           "CUDA_DEVICE_MAX_CONNECTIONS=1";
  return "";
}

// Refuses a launch whose kernels would need co-residency CUDA does not give (see
// src/cuda/launch_meeting.h): one queued on a stream behind an unfinished launch of another rank
// of its world at the same or a later call (that launch waits for this one), or a group of
// sends and receives with a rank of this process on this GPU outside this very launch, on the
// legacy stream or under CUDA_DEVICE_MAX_CONNECTIONS=1 (with one hardware queue even a launch on
// another stream from the same thread may wait behind work queued after this one).
Status checkCoResidency(CuStream stream, const StreamLaunches::Round& round, std::string* why) {
  for (size_t i = 0; i < round.ranks.size(); ++i) {
    DeviceKernelRank& k = *round.ranks[i];
    for (const std::shared_ptr<LaunchDone>& done : k.world().running()) {
      if (done->stream != stream) continue;
      for (const auto& [q, seq] : done->units) {
        if (!k.localPeer(q) || seq < k.callNumber() ||
            std::any_of(round.ranks.begin(), round.ranks.end(),
                        [&](DeviceKernelRank* x) { return x->rank() == q; }))
          continue;
        k.world().raiseAbort();
        *why = "rank " + std::to_string(k.rank()) +
               ": its call would queue on the stream where "
               "the kernel of rank " +
               std::to_string(q) +
               " (same communicator, process and GPU) "
               "still waits for it: ranks calling on one stream must do so from one thread inside "
               "ncclGroupStart/ncclGroupEnd, else each needs a stream of its own; the "
               "communicator is aborted";
        return Status::kInvalidUsage;
      }
    }
    if (!round.planned[i].pointToPoint || (k.maxConnections() != 1 && !legacyStream(stream)))
      continue;
    for (int peer : k.peersOf(round.planned[i]))
      if (k.localPeer(peer) &&
          std::none_of(round.ranks.begin(), round.ranks.end(),
                       [&](DeviceKernelRank* x) { return x->rank() == peer; })) {
        *why = "rank " + std::to_string(k.rank()) + ": sends and receives with rank " +
               std::to_string(peer) +
               " of this process on this GPU need their kernels to run "
               "at the same time, which " +
               (k.maxConnections() == 1 ? std::string("CUDA_DEVICE_MAX_CONNECTIONS=1")
                                        : std::string("the legacy NULL stream")) +
               " does not allow: make both ranks' calls from one thread inside one group, on one "
               "stream";
        return Status::kInvalidUsage;
      }
  }
  return Status::kSuccess;
}

// Prepares rank `k`'s unit `u` as its part of a meeting and records its ready event on `stream`.
Status meetingPart(const cuda::DriverApi& api, DeviceKernelRank* k, const DeviceKernelRank::Unit& u,
                   CuStream stream, MeetingPart* part, std::string* why) {
  part->rank = k;
  part->commRank = k->rank();
  part->seq = k->callNumber();
  part->stream = stream;
  if (Status st = k->prepare(u, &part->args, &part->lanes, why); st != Status::kSuccess) return st;
  const ContextScope scope(api, k->context());
  CuResult rc = api.eventCreate(&part->ready, cuda::kCuEventDisableTiming);
  if (rc == cuda::kCuSuccess) rc = api.eventRecord(part->ready, stream);
  if (rc != cuda::kCuSuccess) {
    if (part->ready) api.eventDestroy(part->ready);
    *why = "recording an event for the ranks' meeting failed: " + cuda::resultText(&api, rc);
    return Status::kUnhandledCudaError;
  }
  return Status::kSuccess;
}

// Queues the kernel carrying every part of a complete meeting (src/cuda/launch_meeting.h).
Status launchMeeting(const cuda::DriverApi& api, std::vector<MeetingPart>& parts,
                     std::string* why) {
  std::sort(parts.begin(), parts.end(),
            [](const MeetingPart& a, const MeetingPart& b) { return a.commRank < b.commRank; });
  InterpLaunch p;
  for (const MeetingPart& part : parts) {
    p.args[p.ranks] = part.args;
    p.firstBlock[p.ranks + 1] = p.firstBlock[p.ranks] + part.lanes;
    ++p.ranks;
  }
  // The kernel goes on the last arriver's stream, after every part's work queued before the call
  // (its ready event) and every rank's last launch on any other stream.
  const CuStream stream = parts.back().stream;
  CuResult rc = kCuSuccess;
  for (const MeetingPart& part : parts) {
    if (rc == kCuSuccess && part.stream != stream) rc = api.streamWaitEvent(stream, part.ready, 0);
    if (const std::shared_ptr<LaunchDone> last = part.rank->lastLaunch();
        rc == kCuSuccess && last && last->stream != stream && !last->finished())
      rc = api.streamWaitEvent(stream, last->event, 0);
  }
  DeviceKernelRank& front = *parts.front().rank;
  const ContextScope scope(api, front.context());
  if (rc == kCuSuccess) rc = front.module().launch(p, stream, front.threads());
  auto done = std::make_shared<LaunchDone>();
  done->api = &api;
  done->stream = stream;
  for (const MeetingPart& part : parts) {
    done->units.emplace_back(part.commRank, part.seq);
    done->keep.push_back(part.ready);
  }
  if (rc == kCuSuccess) rc = api.eventCreate(&done->event, kCuEventDisableTiming);
  if (rc == kCuSuccess) rc = api.eventRecord(done->event, stream);
  // Later work on every other part's stream comes after the kernel.
  std::vector<CuStream> waited{stream};
  for (const MeetingPart& part : parts)
    if (rc == kCuSuccess && std::find(waited.begin(), waited.end(), part.stream) == waited.end()) {
      rc = api.streamWaitEvent(part.stream, done->event, 0);
      waited.push_back(part.stream);
    }
  if (rc != kCuSuccess) {
    *why = "launching the device interpreter for the ranks of this process on this GPU failed: " +
           cuda::resultText(&api, rc);
    return Status::kUnhandledCudaError;
  }
  for (const MeetingPart& part : parts) part.rank->committed(done, true);
  return Status::kSuccess;
}

}  // namespace

Status launchKernels(const std::vector<Call>& calls, const std::vector<DeviceKernelRank*>& ranks,
                     std::string* why) {
  std::vector<StreamLaunches> streams;
  if (Status st = groupByStream(calls, ranks, &streams, why); st != Status::kSuccess) return st;
  const cuda::DriverApi& api = ranks.front()->api();
  std::vector<bool> capturing;
  for (const StreamLaunches& s : streams) {
    int capture = cuda::kCuStreamCaptureStatusNone;
    capturing.push_back(api.streamIsCapturing(s.stream, &capture) == cuda::kCuSuccess &&
                        capture != cuda::kCuStreamCaptureStatusNone);
  }
  // While a stream is captured the set-up's allocations and copies must not invalidate the
  // capture: relaxed capture mode on this thread for the duration.
  int mode = cuda::kCuStreamCaptureModeRelaxed;
  const bool anyCapture = std::find(capturing.begin(), capturing.end(), true) != capturing.end();
  const bool exchanged = anyCapture && api.threadExchangeStreamCaptureMode &&
                         api.threadExchangeStreamCaptureMode(&mode) == cuda::kCuSuccess;
  struct RestoreMode {
    const cuda::DriverApi& api;
    bool exchanged;
    int& mode;
    ~RestoreMode() {
      if (exchanged) api.threadExchangeStreamCaptureMode(&mode);
    }
  } restore{api, exchanged, mode};
  // Every unit of every stream is planned (its FIFOs from other processes exported) before any
  // is prepared (the FIFOs it sends on imported): a rank of this thread never waits for an
  // export that this thread has still to make for another of its ranks.
  for (StreamLaunches& s : streams) {
    size_t rounds = 0;
    for (Communicator* comm : s.order) rounds = std::max(rounds, s.units[comm].size());
    s.rounds.resize(rounds);
    for (size_t j = 0; j < rounds; ++j)
      for (Communicator* comm : s.order) {
        if (s.units[comm].size() <= j) continue;
        StreamLaunches::Round& round = s.rounds[j];
        round.ranks.push_back(s.kernelRanks[comm]);
        round.planned.emplace_back();
        if (Status st = round.ranks.back()->plan(s.units[comm][j], &round.planned.back(), why);
            st != Status::kSuccess)
          return st;
      }
  }
  size_t rounds = 0;
  for (const StreamLaunches& s : streams) rounds = std::max(rounds, s.rounds.size());
  // Round by round over every stream: round j of every stream is queued (its meetings met)
  // before round j + 1 of any, so that a rank's units stay in order.
  for (size_t j = 0; j < rounds; ++j) {
    std::map<DeviceWorld*, std::pair<std::string, std::vector<MeetingPart>>> meetings;
    for (size_t i = 0; i < streams.size(); ++i) {
      if (j >= streams[i].rounds.size()) continue;
      const StreamLaunches::Round& round = streams[i].rounds[j];
      StreamLaunches::Round alone;
      for (size_t x = 0; x < round.ranks.size(); ++x) {
        DeviceKernelRank* k = round.ranks[x];
        const std::string cause =
            round.planned[x].pointToPoint ? "" : meetCause(*k, streams[i].stream);
        if (cause.empty()) {
          alone.ranks.push_back(k);
          alone.planned.push_back(round.planned[x]);
          continue;
        }
        if (capturing[i]) {
          *why = "rank " + std::to_string(k->rank()) + ": because of " + cause +
                 ", the ranks of this process on this GPU run each call as one kernel, which "
                 "cannot be captured into a CUDA graph";
          return Status::kInvalidUsage;
        }
        auto& [meetCauseText, parts] = meetings[&k->world()];
        meetCauseText = cause;
        parts.emplace_back();
        if (Status st =
                meetingPart(api, k, round.planned[x], streams[i].stream, &parts.back(), why);
            st != Status::kSuccess)
          return st;
      }
      if (alone.ranks.empty()) continue;
      if (Status st = checkCoResidency(streams[i].stream, alone, why); st != Status::kSuccess)
        return st;
      if (Status st = launchRound(api, streams[i].stream, capturing[i], alone, why);
          st != Status::kSuccess)
        return st;
    }
    for (auto& [world, meeting] : meetings) {
      DeviceKernelRank& first = *meeting.second.front().rank;
      const uint64_t seq = meeting.second.front().seq;
      // A rank that already launched this call on its own would wait for this one forever.
      for (const std::shared_ptr<LaunchDone>& done : world->running())
        for (const auto& [q, qseq] : done->units)
          if (qseq == seq && first.localPeer(q) &&
              std::none_of(meeting.second.begin(), meeting.second.end(),
                           [&](const MeetingPart& x) { return x.commRank == q; })) {
            for (MeetingPart& part : meeting.second) api.eventDestroy(part.ready);
            world->raiseAbort();
            *why = "rank " + std::to_string(first.rank()) + ": because of " + meeting.first +
                   " the ranks of this process on this GPU run each call as one kernel, but rank " +
                   std::to_string(q) +
                   " already launched this call alone on a stream of its own: "
                   "call every rank on the legacy NULL stream or none; the communicator is aborted";
            return Status::kInvalidUsage;
          }
      const auto launch = [&api](std::vector<MeetingPart>& parts, std::string* w) {
        return launchMeeting(api, parts, w);
      };
      if (Status st =
              world->meeting().arrive(api, seq, std::move(meeting.second), first.ranksHere(),
                                      first.timeout(), meeting.first, launch, why);
          st != Status::kSuccess)
        return st;
    }
  }
  return Status::kSuccess;
}

}  // namespace weft::cuda
