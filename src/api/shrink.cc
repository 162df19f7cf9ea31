// Communicators made from a parent (ncclCommSplit, ncclCommShrink) and ncclCommRevoke.
//
// Both derivations agree on a fresh unique id over the parent's bootstrap, then run an ordinary
// rendezvous with it. A shrink talks only to the survivors (point-to-point from the lowest
// surviving rank), so it works after an excluded rank died; a split needs every parent rank
// (an allgather), as NCCL's does.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "src/api/handle.h"
#include "src/bootstrap/bootstrap.h"
#include "src/common/clock.h"
#include "src/core/group.h"

namespace weft::api {
namespace {

// How long a revoke or a NCCL_SHRINK_ABORT waits for another thread's call on the parent to
// see the abort and leave (it returns within the executor's longest sleep).
constexpr std::chrono::milliseconds kQuiesceWait{10000};

// Counts a child's job on its parent's handle while the job reads the parent.
class ChildJob {
 public:
  explicit ChildJob(ncclComm* parent) : parent_(parent) { parent_->childJobs.fetch_add(1); }
  ~ChildJob() { release(); }
  void release() {
    if (parent_) parent_->childJobs.fetch_sub(1);
    parent_ = nullptr;
  }
  ChildJob(const ChildJob&) = delete;
  ChildJob& operator=(const ChildJob&) = delete;

 private:
  ncclComm* parent_;
};

// Runs `job` on the communicator `comm` itself: now when `blocking` (or at an open group's End),
// else on the handle's side thread, returning kInProgress (ncclCommGetAsyncError says when it
// is done and how it went).
Status startSideJob(ncclComm* comm, bool blocking, std::function<Status(std::string*)> job,
                    std::string* why) {
  if (blocking || core::groupDepth() > 0) return core::deferOrRun(std::move(job), why);
  if (comm->sideBusy.load())
    fail(Status::kInvalidUsage, "a non-blocking operation on this communicator is still running");
  if (comm->sideThread.joinable()) comm->sideThread.join();
  comm->sideStatus = Status::kSuccess;
  comm->sideBusy.store(true);
  comm->sideThread = std::thread([comm, job = std::move(job)] {
    std::string msg;
    Status st;
    try {
      st = job(&msg);
    } catch (const Error& e) {
      st = e.code();
      msg = e.what();
    } catch (const std::exception& e) {
      st = Status::kInternalError;
      msg = e.what();
    }
    comm->sideError = msg;
    comm->sideStatus = st;
    if (st != Status::kSuccess) setLastError(msg);
    comm->sideBusy.store(false);
  });
  return Status::kInProgress;
}

// Bootstrap tags of the shrink exchange. Fixed tags: a peer's messages arrive in order, so
// successive shrinks pair up in call order, and an offer for another exclude list is recognised
// (its hash differs) instead of being waited for under a tag never sent.
constexpr int kOfferTag = 0x5348524b;    // "SHRK": leader -> survivor, the new id
constexpr int kAnswerTag = 0x53485241;   // survivor -> leader: the offer matches its own list
constexpr int kVerdictTag = 0x53485256;  // leader -> survivor: every survivor answered yes

// What the lowest surviving rank sends every other survivor.
struct ShrinkOffer {
  uint32_t survivors;
  uint32_t pad;
  uint64_t excludedHash;  // the exclude list each rank passed must be the same
  bootstrap::UniqueIdBytes id;
};

// A survivor's answer, and the leader's verdict: kAgreed, or why not and which rank.
struct ShrinkVote {
  enum : int32_t { kAgreed = 0, kOtherList = 1, kUnreachable = 2 };
  int32_t what = kAgreed;
  int32_t rank = -1;
};

uint64_t hashRanks(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  for (int r : ranks) h = (h ^ static_cast<uint32_t>(r)) * 1099511628211ull;
  return h;
}

std::string voteText(const ShrinkVote& v) {
  const std::string who = "rank " + std::to_string(v.rank);
  return v.what == ShrinkVote::kOtherList
             ? who + " passed another excludeRanksList (every remaining rank must pass the same)"
             : who + " cannot be reached (exclude the ranks that failed)";
}

// The leader (lowest survivor) offers a new unique id to every other survivor, collects their
// answers, and tells them all whether everyone agreed: any failure (an unreachable survivor,
// another exclude list) fails the shrink on every survivor at once, instead of leaving the
// others waiting at a rendezvous that cannot fill. Every wait is bounded by the parent's timeout.
bootstrap::UniqueIdBytes agreeOnId(core::Communicator* parent, const std::vector<int>& survivors,
                                   uint64_t excludedHash) {
  bootstrap::Bootstrap& boot = parent->bootstrap();
  const int me = parent->rank(), leader = survivors.front();
  if (me != leader) {
    ShrinkOffer offer{};
    boot.recv(leader, kOfferTag, &offer, sizeof(offer));
    ShrinkVote answer;
    if (offer.survivors != survivors.size() || offer.excludedHash != excludedHash)
      answer = {ShrinkVote::kOtherList, me};
    boot.send(leader, kAnswerTag, &answer, sizeof(answer));
    ShrinkVote verdict;
    boot.recv(leader, kVerdictTag, &verdict, sizeof(verdict));
    if (verdict.what != ShrinkVote::kAgreed)
      fail(verdict.what == ShrinkVote::kOtherList ? Status::kInvalidUsage : Status::kRemoteError,
           voteText(verdict));
    return offer.id;
  }
  const ShrinkOffer offer{static_cast<uint32_t>(survivors.size()), 0, excludedHash,
                          bootstrap::generateUniqueId(parent->tuning())};
  std::vector<bool> reached(survivors.size(), false);
  ShrinkVote verdict;
  std::string why;
  for (size_t i = 1; i < survivors.size(); ++i) try {
      boot.send(survivors[i], kOfferTag, &offer, sizeof(offer));
      reached[i] = true;
    } catch (const Error& e) {
      if (verdict.what == ShrinkVote::kAgreed) verdict = {ShrinkVote::kUnreachable, survivors[i]};
      why += std::string(" ") + e.what();
    }
  for (size_t i = 1; i < survivors.size(); ++i) {
    if (!reached[i]) continue;
    ShrinkVote answer;
    try {
      boot.recv(survivors[i], kAnswerTag, &answer, sizeof(answer));
    } catch (const Error& e) {
      reached[i] = false;
      answer = {ShrinkVote::kUnreachable, survivors[i]};
      why += std::string(" ") + e.what();
    }
    if (verdict.what == ShrinkVote::kAgreed) verdict = answer;
  }
  for (size_t i = 1; i < survivors.size(); ++i) try {
      if (reached[i]) boot.send(survivors[i], kVerdictTag, &verdict, sizeof(verdict));
    } catch (const Error&) {
      // It went away after answering: the new rendezvous finds that out.
    }
  if (verdict.what != ShrinkVote::kAgreed)
    fail(verdict.what == ShrinkVote::kOtherList ? Status::kInvalidUsage : Status::kRemoteError,
         voteText(verdict) + why);
  return offer.id;
}

// The parent's survivors (not in `excluded`, sorted) agree on an id and join its rendezvous.
core::Communicator* shrinkInto(core::Communicator* parent, const std::vector<int>& excluded,
                               bool abortFirst, const core::CommConfig& cfg, ChildJob* reading) {
  if (abortFirst) {
    parent->abortDataPath();
    if (!parent->waitForRuns(kQuiesceWait))
      fail(Status::kInternalError, "NCCL_SHRINK_ABORT: a call on the parent still runs after " +
                                       std::to_string(kQuiesceWait.count()) + " ms");
  }
  std::vector<int> survivors;
  for (int r = 0; r < parent->size(); ++r)
    if (!std::binary_search(excluded.begin(), excluded.end(), r)) survivors.push_back(r);
  const int newRank = static_cast<int>(
      std::find(survivors.begin(), survivors.end(), parent->rank()) - survivors.begin());
  const bootstrap::UniqueIdBytes id = agreeOnId(parent, survivors, hashRanks(excluded));
  reading->release();  // the parent is not read again
  return new core::Communicator(id, newRank, static_cast<int>(survivors.size()), cfg);
}

// Every parent rank publishes (color, key); each color's first member makes the id. Returns null
// for NCCL_SPLIT_NOCOLOR.
core::Communicator* splitInto(core::Communicator* parent, int color, int key,
                              const core::CommConfig& cfg, ChildJob* reading) {
  struct Entry {
    int32_t color, key, rank, pad;
    bootstrap::UniqueIdBytes id;
  };
  const int n = parent->size(), me = parent->rank();
  std::vector<Entry> all(n);
  all[me] = {color, key, me, 0, {}};
  std::vector<int> members;
  parent->bootstrap().allgather(all.data(), sizeof(Entry));
  for (int r = 0; r < n; ++r)
    if (all[r].color == color && color != NCCL_SPLIT_NOCOLOR) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[a].key != all[b].key ? all[a].key < all[b].key : a < b;
  });
  const bool leader = !members.empty() && members.front() == me;
  if (leader) all[me].id = bootstrap::generateUniqueId(parent->tuning());
  parent->bootstrap().allgather(all.data(), sizeof(Entry));
  reading->release();
  if (color == NCCL_SPLIT_NOCOLOR) return nullptr;
  const int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  return new core::Communicator(all[members.front()].id, newRank, static_cast<int>(members.size()),
                                cfg);
}

// The excluded ranks, checked and sorted; throws on a malformed list.
std::vector<int> excludedRanks(const int* list, int count, int nranks, int me) {
  if (count < 0)
    fail(Status::kInvalidArgument, "excludeRanksCount is negative: " + std::to_string(count));
  if (count > 0 && !list) fail(Status::kInvalidArgument, "excludeRanksList is NULL");
  std::vector<int> excluded(list, list + count);
  std::sort(excluded.begin(), excluded.end());
  for (size_t i = 0; i < excluded.size(); ++i) {
    const int r = excluded[i];
    if (r < 0 || r >= nranks)
      fail(Status::kInvalidArgument, "excluded rank " + std::to_string(r) + " out of range [0, " +
                                         std::to_string(nranks) + ")");
    if (i > 0 && excluded[i - 1] == r)
      fail(Status::kInvalidArgument, "rank " + std::to_string(r) + " is excluded twice");
    if (r == me)
      fail(Status::kInvalidArgument,
           "rank " + std::to_string(me) +
               " is in its own excludeRanksList: excluded ranks must not call ncclCommShrink");
  }
  return excluded;
}

}  // namespace
}  // namespace weft::api

using namespace weft;
using weft::api::guard;

WEFT_API(ncclResult_t, ncclCommSplit,
         (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config)) {
  return guard("ncclCommSplit", [&](std::string* why) {
    core::Communicator* parent = api::communicator(comm);
    if (!newcomm) fail(Status::kInvalidArgument, "newcomm is NULL");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      fail(Status::kInvalidArgument, "color must be >= 0 or NCCL_SPLIT_NOCOLOR");
    // As NCCL: without a config the child inherits the parent's.
    const core::CommConfig cfg = api::toConfig(config, parent->config());
    *newcomm = nullptr;
    auto reading = std::make_shared<api::ChildJob>(comm);
    if (color == NCCL_SPLIT_NOCOLOR)  // no child: the exchange runs on the parent
      return api::startSideJob(
          comm, cfg.blocking,
          [parent, key, cfg, reading](std::string*) {
            api::splitInto(parent, NCCL_SPLIT_NOCOLOR, key, cfg, reading.get());
            return Status::kSuccess;
          },
          why);
    auto* handle = new ncclComm;
    const Status st = api::startCommJob(
        handle, cfg.blocking,
        [parent, color, key, cfg, reading](std::string*) {
          return api::splitInto(parent, color, key, cfg, reading.get());
        },
        why);
    // A failed handle stays a tombstone (handles are never freed).
    if (st == Status::kSuccess || st == Status::kInProgress || core::groupDepth() > 0)
      *newcomm = handle;
    return st;
  });
}

WEFT_API(ncclResult_t, ncclCommShrink,
         (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
          ncclConfig_t* config, int shrinkFlags)) {
  return guard("ncclCommShrink", [&](std::string* why) {
    core::Communicator* parent = api::communicator(comm);
    if (!newcomm) fail(Status::kInvalidArgument, "newcomm is NULL");
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      fail(Status::kInvalidArgument, "unknown shrinkFlags " + std::to_string(shrinkFlags));
    const std::vector<int> excluded =
        api::excludedRanks(excludeRanksList, excludeRanksCount, parent->size(), parent->rank());
    const core::CommConfig cfg = api::toConfig(config, parent->config());
    const bool abortFirst = (shrinkFlags & NCCL_SHRINK_ABORT) != 0;
    *newcomm = nullptr;
    auto reading = std::make_shared<api::ChildJob>(comm);
    auto* handle = new ncclComm;
    const Status st = api::startCommJob(
        handle, cfg.blocking,
        [parent, excluded, abortFirst, cfg, reading](std::string*) {
          return api::shrinkInto(parent, excluded, abortFirst, cfg, reading.get());
        },
        why);
    if (st == Status::kSuccess || st == Status::kInProgress || core::groupDepth() > 0)
      *newcomm = handle;
    return st;
  });
}

WEFT_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags)) {
  return guard("ncclCommRevoke", [&](std::string* why) {
    if (!comm) return Status::kSuccess;  // as NCCL: revoking no communicator does nothing
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      fail(Status::kInvalidArgument,
           "revokeFlags must be NCCL_REVOKE_DEFAULT (0), got " + std::to_string(revokeFlags));
    core::Communicator* impl = api::communicator(comm);
    if (!impl->revoke()) fail(Status::kInvalidArgument, "communicator was already revoked");
    // Quiescent once every call of another thread has seen the abort and left; the error those
    // calls met is then forgotten: the communicator reports success, ready to shrink or split.
    auto quiesce = [impl](std::string*) {
      if (!impl->waitForRuns(api::kQuiesceWait))
        fail(Status::kInternalError, "ncclCommRevoke: a call still runs after " +
                                         std::to_string(api::kQuiesceWait.count()) + " ms");
      impl->clearAsyncError();
      return Status::kSuccess;
    };
    // Not a group member: a blocking revoke is done when it returns, even inside a group.
    if (impl->config().blocking) return quiesce(why);
    return api::startSideJob(comm, false, quiesce, why);
  });
}
