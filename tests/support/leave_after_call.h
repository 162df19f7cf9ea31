// Ranks that leave as soon as their call returns: threads of this process, each with its own
// communicator, that run one checked collective and destroy their communicator at once. Shared
// by the shared-memory (tests/unit/core) and tcp (tests/tcp) variants; the caller picks the
// transport with the environment (NCCL_P2P_DISABLE is set here, so links are never in-process
// pointers).
#pragma once
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "src/plan/plan.h"
#include "tests/support/collective_check.h"
#include "tests/support/scoped_env.h"

namespace weft::test {

inline Coll collOf(weft::plan::Collective c) {
  switch (c) {
    case weft::plan::Collective::kAllReduce:
      return Coll::kAllReduce;
    case weft::plan::Collective::kBroadcast:
      return Coll::kBroadcast;
    case weft::plan::Collective::kReduce:
      return Coll::kReduce;
    case weft::plan::Collective::kAllGather:
      return Coll::kAllGather;
    case weft::plan::Collective::kReduceScatter:
      return Coll::kReduceScatter;
    case weft::plan::Collective::kAlltoAll:
      return Coll::kAlltoAll;
    case weft::plan::Collective::kGather:
      return Coll::kGather;
    case weft::plan::Collective::kScatter:
      return Coll::kScatter;
    case weft::plan::Collective::kSendRecv:
      return Coll::kSendRecv;
  }
  return Coll::kSendRecv;
}

// Fresh communicators of n ranks on threads (NCCL_ALGO=algo, WEFT_TIMEOUT_MS=timeoutMs); each
// rank runs `c` once, checks it, and destroys its communicator at once. On each rank's thread
// before(rank) runs before its call and after(rank) between its call and its destroy. Returns
// the first failure, or "".
template <class Before, class After>
std::string runAndLeave(int n, const char* algo, const CheckCase& c, const char* timeoutMs,
                        Before before, After after) {
  ScopedEnv env({{"NCCL_ALGO", algo}, {"NCCL_P2P_DISABLE", "1"}, {"WEFT_TIMEOUT_MS", timeoutMs}});
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return "ncclGetUniqueId failed";
  std::vector<std::string> failure(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
        failure[r] = std::string("init: ") + ncclGetLastError(nullptr);
        return;
      }
      before(r);
      const CheckResult res = runCheckRanks({comm}, {r}, n, c);
      if (res.status != ncclSuccess || res.wrong != 0) failure[r] = res.message;
      after(r);
      if (ncclCommDestroy(comm) != ncclSuccess && failure[r].empty()) failure[r] = "destroy";
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!failure[r].empty())
      return std::string(algo) + " " + describe(c, n) + ": rank " + std::to_string(r) + ": " +
             failure[r];
  return "";
}

}  // namespace weft::test
