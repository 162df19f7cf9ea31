// What the executor sees of a link to one peer on one channel: a FIFO of slots in each
// direction. The executor never sees a transport's internals.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.h"
#include "src/common/reduce.h"

namespace weft::transport {

class Connection {
 public:
  virtual ~Connection() = default;

  // Capacity of one slot in bytes (the pipelining slice).
  virtual size_t slotBytes() const = 0;

  // Send direction: a free slot to fill, or nullptr while the FIFO is full.
  virtual void* sendSlot() = 0;
  // Like sendSlot, when the caller knows the message will hold `bytes` (small ones may go inline).
  virtual void* sendSlotFor(size_t bytes) { return sendSlot(); }
  // Publishes the slot returned by sendSlot() holding `bytes` bytes, with a tag the receiver checks.
  virtual void post(uint32_t bytes, uint32_t tag) = 0;

  // Receive direction: the oldest full slot, or nullptr while none has arrived.
  virtual const void* recvSlot(uint32_t* bytes, uint32_t* tag) = 0;
  // Returns the slot from recvSlot() to the sender.
  virtual void release() = 0;

  // --- Rendezvous (optional): a message may carry the address of the sender's own buffer
  // instead of the data. The receiver then reads it in place (same address space: zero copy)
  // or with one kernel copy (another process: CMA). Transports without it keep the defaults.

  // Sender side: true once the receiver has shown it can read this process's memory.
  virtual bool peerCanReadMe() { return false; }
  // Whether the receiver can read [addr, addr+bytes) of this process in place of a copy (some
  // transports only reach shared regions, e.g. ncclMemAlloc'd memory).
  virtual bool peerCanRead(const void* addr, size_t bytes) { return peerCanReadMe(); }
  // Publishes a message whose `bytes` bytes stay at `addr` until consumed(postedCount()) holds.
  virtual void postRemote(const void* addr, uint32_t bytes, uint32_t tag) {
    fail(Status::kInternalError, "transport has no rendezvous messages");
  }
  // Largest message postRemote may carry. Receivers that read the sender's memory in place (or
  // with one kernel copy) take one larger than a slot, a slice at a time; a transport that
  // moves the data into the receiver's slots caps it at a slot.
  virtual size_t maxReferenceBytes() const { return slotBytes(); }
  // Messages posted so far, and whether the receiver has released the first `count` of them.
  virtual uint64_t postedCount() const { return 0; }
  virtual bool consumed(uint64_t count) const { return true; }

  // Receiver side: like recvSlot, but a remote message from another address space returns
  // nullptr data with *remoteAddr set (read it with readRemote before release()). Messages
  // whose memory is directly addressable come back as ordinary data pointers.
  virtual const void* recvMessage(uint32_t* bytes, uint32_t* tag, uint64_t* remoteAddr,
                                  bool* present) {
    *remoteAddr = 0;
    const void* p = recvSlot(bytes, tag);
    *present = p != nullptr;
    return p;
  }
  virtual void readRemote(void* dst, uint64_t remoteAddr, size_t bytes) {
    fail(Status::kInternalError, "transport has no rendezvous messages");
  }

  // --- Shared copies (optional). Receiver side: copies the message being received (the data
  // recvMessage returned, before release()) to dst. A transport whose sender can write the
  // receiver's memory may let the sender, idle while it waits for the message to be consumed,
  // copy part of it: both cores then copy. Default: the receiver copies it all.
  virtual void land(void* dst, const void* src, size_t bytes, Store store) {
    copyElements(DataType::kUint8, dst, src, bytes, nullptr, store);
  }
  // Sender side, while rendezvous messages it posted are being read: copies pieces the receiver
  // offered; true if it copied any.
  virtual bool assist() { return false; }

  // --- Landing (optional): the receiver names its destination ahead, and a sender that can
  // write there stores the data in place (fused with the reduction that produces it) instead of
  // the receiver copying it again.
  // Receiver side: messages tagged `tag` from the next unreceived one on fill [dst, dst+bytes)
  // in order. True if offered. recvMessage() then returns a landed message's place in dst as
  // its data.
  virtual bool offerLanding(void* dst, size_t bytes, uint32_t tag) { return false; }
  // Sender side: where the next message's `bytes` go in the receiver's memory (mapped here), or
  // nullptr (no offer covers it, it was made for another tag, i.e. a mismatched operation, or
  // no descriptor is free). Write them, then postLanded().
  virtual void* landingFor(size_t bytes, uint32_t tag) { return nullptr; }
  virtual void postLanded(uint32_t bytes, uint32_t tag) {
    fail(Status::kInternalError, "transport has no landing");
  }
  // kSuccess while the peer is alive; otherwise kRemoteError and a message naming it. Called
  // only from slow paths (after a wait has lasted a while).
  virtual Status health(std::string* why) = 0;

  // Marks both directions failed so a peer blocked on this link gives up promptly.
  virtual void poison() = 0;
  virtual bool poisoned() const = 0;
  // The peer closed its end cleanly: nothing more will arrive. Not an error by itself (a peer
  // that finished its part of a collective says goodbye so), only for a receiver still waiting
  // for data the link does not hold.
  virtual bool peerEnded() const { return false; }

  // Transport name for logs ("local", "shm", "tcp", ...).
  virtual const char* transportName() const = 0;
};

}  // namespace weft::transport
