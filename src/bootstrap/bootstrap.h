// Out-of-band bootstrap: the unique id, the root rendezvous and a small set of collectives over
// TCP (allgather, barrier, point-to-point bytes) used to set up communicators. Every connection
// presents the id's secret before anything else is read; every wait has a timeout.
//
// This header is the interface only. Its functions and Bootstrap::create are defined by the
// rendezvous (rendezvous.cc), which is above the implementation it returns (tcp_bootstrap.h);
// the implementation and the id's encoding (unique_id.h) include this header, never the reverse.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/tuning.h"

namespace weft::bootstrap {

inline constexpr size_t kUniqueIdBytes = 128;
struct UniqueIdBytes {
  char bytes[kUniqueIdBytes];
};

// Creates a fresh id: starts a root listener (a background thread that serves one rendezvous,
// then exits) on NCCL_COMM_ID's address if set, else on the first usable interface (loopback as a
// last resort), and a random 32-byte secret.
// `tuning` gives NCCL_COMM_ID, NCCL_SOCKET_IFNAME and the root's timeout.
UniqueIdBytes generateUniqueId(const Tuning& tuning);

// Decoded id, for logs and tests.
struct IdInfo {
  std::string rootAddress;  // "ip:port" or "[ipv6]:port"
  uint64_t secretHash = 0;  // hash of the secret (never print the secret itself)
};
IdInfo describe(const UniqueIdBytes& id);  // throws Error(kInvalidArgument) on a malformed id

class Bootstrap {
 public:
  // Joins the rendezvous of `id` as `rank` of `nranks`. Throws weft::Error on timeout, a bad id,
  // nranks mismatch or duplicate ranks. `timeout` bounds the whole rendezvous, `callTimeout`
  // each later exchange (allgather, barrier, send/recv).
  static std::unique_ptr<Bootstrap> create(const UniqueIdBytes& id, int rank, int nranks,
                                           std::chrono::milliseconds timeout,
                                           std::chrono::milliseconds callTimeout);
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // A 64-bit value equal on all ranks of this communicator and unique per rendezvous
  // (derived from the secret); used to name shared-memory segments.
  virtual uint64_t commHash() const = 0;

  // In place: `data` holds size() blocks of `bytesPerRank`; block rank() is this rank's
  // contribution; on return all blocks are filled. Throws on timeout or a dead peer.
  virtual void allgather(void* data, size_t bytesPerRank) = 0;
  virtual void barrier() = 0;

  // Ordered, tagged point-to-point bytes (connections opened on demand).
  virtual void send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual void recv(int peer, int tag, void* data, size_t bytes) = 0;

  // Makes every blocked or future call on this object throw promptly (used by ncclCommAbort).
  virtual void abort() = 0;
};

}  // namespace weft::bootstrap
