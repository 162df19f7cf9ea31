// Destroyed communicator handles, kept as tombstones for a while before they are freed.
#include <array>
#include <mutex>

#include "src/api/handle.h"

namespace weft::api {
namespace {

// How many destroyed handles stay readable. A call on a handle destroyed fewer than this many
// destroys ago reads the tombstone and fails cleanly; older handles are freed, so a process that
// creates and destroys communicators for ever holds a bounded number of them.
constexpr size_t kTombstones = 256;

struct Quarantine {
  std::mutex mu;
  std::array<ncclComm*, kTombstones> ring{};
  size_t next = 0;
};

Quarantine& quarantine() {
  static Quarantine* q = new Quarantine;  // never destroyed: handles may be retired at exit
  return *q;
}

}  // namespace

void retireHandle(ncclComm* comm) {
  // What a tombstone needs is its magic word; the rest is released now.
  std::string().swap(comm->initError);
  ncclComm* oldest = nullptr;
  {
    Quarantine& q = quarantine();
    std::lock_guard<std::mutex> lock(q.mu);
    oldest = q.ring[q.next];
    q.ring[q.next] = comm;
    q.next = (q.next + 1) % kTombstones;
  }
  delete oldest;
}

}  // namespace weft::api
