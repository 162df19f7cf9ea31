// What the executor sees of a link to one peer on one channel: a FIFO of slots in each
// direction (post, receive, release), the peer's health, and a poison flag. Every transport
// offers these. What some transports can do beyond slots is a capability the connection offers
// through an interface of its own (capabilities.h), null where it has none:
//   ReferenceSends  a message may name the sender's memory instead of carrying the data
//                   (shared memory and ncclMemAlloc'd regions; tcp sends straight from the
//                   user's buffer; ibverbs will post RDMA from registered memory)
//   PeerMemory      the peer's memory is reachable: read it (CMA, mapped regions, RDMA read,
//                   CUDA IPC), store into an offered landing (RDMA write, NVLink stores), and
//                   share a copy between sender and receiver
// The executor never sees a transport's internals.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.h"

namespace weft::transport {

class ReferenceSends;
class PeerMemory;

class Connection {
 public:
  virtual ~Connection() = default;

  // Capacity of one slot in bytes (the pipelining slice).
  virtual size_t slotBytes() const = 0;

  // Send direction: a free slot to fill, or nullptr while the FIFO is full.
  virtual void* sendSlot() = 0;
  // Like sendSlot, when the caller knows the message will hold `bytes` (small ones may go inline).
  virtual void* sendSlotFor(size_t bytes) { return sendSlot(); }
  // Publishes the slot returned by sendSlot() holding `bytes` bytes, with a tag the receiver
  // checks.
  virtual void post(uint32_t bytes, uint32_t tag) = 0;

  // Receive direction: the oldest full slot, or nullptr while none has arrived.
  virtual const void* recvSlot(uint32_t* bytes, uint32_t* tag) = 0;
  // Like recvSlot, for messages that may be references (ReferenceSends): one whose data lies in
  // another address space comes back as nullptr data with *remoteAddr set (read it with
  // PeerMemory::readRemote before release()); *present tells whether a message arrived at all.
  virtual const void* recvMessage(uint32_t* bytes, uint32_t* tag, uint64_t* remoteAddr,
                                  bool* present) {
    *remoteAddr = 0;
    const void* p = recvSlot(bytes, tag);
    *present = p != nullptr;
    return p;
  }
  // Returns the message from recvSlot() / recvMessage() to the sender.
  virtual void release() = 0;
  // Receiver side: the data recvMessage() returned is not read again before the next
  // recvMessage() (a large message taken a slice at a time stays unreleased between its slices).
  // release() says the same.
  virtual void doneReading() {}
  // Sender side, after this rank gave up an operation and poisoned the link: waits, for at most
  // `timeout`, until the peer no longer reads memory of this rank that a message named in place.
  // The caller's buffers are the caller's again once it returns: a peer of the same address
  // space that is still reading them must finish first. False if the peer still reads.
  virtual bool awaitPeerOutOfMemory(std::chrono::milliseconds timeout) { return true; }

  // kSuccess while the peer is alive; otherwise kRemoteError and a message naming it. Called
  // only from slow paths (after a wait has lasted a while).
  virtual Status health(std::string* why) = 0;
  // Marks both directions failed so a peer blocked on this link gives up promptly.
  virtual void poison() = 0;
  // The same, naming the rank whose failure this is (this rank, or the one it learnt of), so
  // that the peer can name it too. Transports that cannot carry it poison plainly.
  virtual void poisonFor(int causeRank) { poison(); }
  // True once either side poisoned the link, or the peer is known to have failed.
  virtual bool poisoned() const = 0;
  // The rank whose failure poisoned the link, where the transport carries it; else -1.
  virtual int poisonCause() const { return -1; }
  // The peer closed its end cleanly: nothing more will arrive. Not an error by itself (a peer
  // that finished its part of a collective says goodbye so), only for a receiver still waiting
  // for data the link does not hold.
  virtual bool peerEnded() const { return false; }

  // Transport name for logs ("local", "shm", "tcp", ...).
  virtual const char* transportName() const = 0;

  // Capabilities (capabilities.h): null where the connection has none.
  virtual ReferenceSends* referenceSends() { return nullptr; }
  virtual PeerMemory* peerMemory() { return nullptr; }
};

}  // namespace weft::transport
