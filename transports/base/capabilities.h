// What a connection may offer beyond slots (see connection.h). A transport implements the
// interfaces it can honour and returns itself from Connection::referenceSends() /
// peerMemory(); the executor's lowering (src/exec/lower.cc) allows a transfer mode on a link
// only where the link offers it.
//
// How coming transports fit:
// - ibverbs: ReferenceSends posts RDMA from registered memory (the MR cache registers user
//   buffers on first use; peerCanRead says whether a region is registered). PeerMemory's
//   landing is an RDMA WRITE into the receiver's registered buffer, its offer carrying the
//   rkey; readRemote is an RDMA READ of a remote address the message names.
// - CUDA: ranks of one process, CUDA IPC handles or NVLink peer access make the peer's device
//   buffers addressable: references read them in place, landings are peer stores, and a shared
//   copy splits a copy between two copy engines.
#pragma once
#include <cstddef>
#include <cstdint>

#include "src/common/reduce.h"

namespace weft::transport {

// Messages that name the sender's memory instead of carrying the data. The receiver reads it in
// place (same address space: zero copy), with one kernel copy (another process: CMA), or the
// transport sends it from there (tcp: no copy into a slot first).
class ReferenceSends {
 public:
  virtual ~ReferenceSends() = default;
  // Whether [addr, addr + bytes) of this process can travel by reference (some transports
  // reach only shared regions, e.g. ncclMemAlloc'd memory).
  virtual bool peerCanRead(const void* addr, size_t bytes) = 0;
  // Publishes a message whose `bytes` bytes stay at `addr` until consumed(postedCount()).
  virtual void postReference(const void* addr, uint32_t bytes, uint32_t tag) = 0;
  // Largest message postReference may carry. Receivers that read the sender's memory in place
  // take one larger than a slot, a slice at a time; a transport that moves the data into the
  // receiver's slots caps it at a slot.
  virtual size_t maxReferenceBytes() const = 0;
  // Messages posted so far, and whether the receiver has released the first `count` of them.
  virtual uint64_t postedCount() const = 0;
  virtual bool consumed(uint64_t count) const = 0;
};

// Direct access to the peer's memory.
class PeerMemory {
 public:
  virtual ~PeerMemory() = default;

  // Receiver side: copies `bytes` at the sender's `remoteAddr` (from recvMessage) to dst.
  virtual void readRemote(void* dst, uint64_t remoteAddr, size_t bytes) = 0;

  // Shared copies. Receiver side: copies the message being received (the data recvMessage
  // returned, before release()) to dst; a sender that can write the receiver's memory and is
  // idle while it waits for its message to be consumed may copy part of it, so both cores copy.
  virtual void land(void* dst, const void* src, size_t bytes, Store store) = 0;
  // Sender side, while references it posted are being read: copies pieces the receiver offered;
  // true if it copied any.
  virtual bool assist() = 0;

  // Landing: the receiver names its destination ahead, and a sender that can write there
  // stores the data in place (fused with the reduction that produces it) instead of the
  // receiver copying it again.
  // Receiver side: messages tagged `tag` from the next unreceived one on fill [dst, dst+bytes)
  // in order. True if offered. recvMessage() then returns a landed message's place in dst as
  // its data.
  virtual bool offerLanding(void* dst, size_t bytes, uint32_t tag) = 0;
  // Sender side: where the next message's `bytes` go in the receiver's memory (mapped here), or
  // nullptr (no offer covers it, it was made for another tag, i.e. a mismatched operation, or
  // no descriptor is free). Write them, then postLanded().
  virtual void* landingFor(size_t bytes, uint32_t tag) = 0;
  virtual void postLanded(uint32_t bytes, uint32_t tag) = 0;
  // Sender side: a landing that landingFor() returned is not written after all (the slice
  // waits for its input, or fails); the next slice asks landingFor() again.
  virtual void withdrawLanding() {}
};

}  // namespace weft::transport
