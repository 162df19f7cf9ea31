// What the executor sees of a link to one peer on one channel: a FIFO of slots in each
// direction. The executor never sees a transport's internals.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/error.h"

namespace weft::transport {

class Connection {
 public:
  virtual ~Connection() = default;

  // Capacity of one slot in bytes (the pipelining slice).
  virtual size_t slotBytes() const = 0;

  // Send direction: a free slot to fill, or nullptr while the FIFO is full.
  virtual void* sendSlot() = 0;
  // Publishes the slot returned by sendSlot() holding `bytes` bytes, with a tag the receiver checks.
  virtual void post(uint32_t bytes, uint32_t tag) = 0;

  // Receive direction: the oldest full slot, or nullptr while none has arrived.
  virtual const void* recvSlot(uint32_t* bytes, uint32_t* tag) = 0;
  // Returns the slot from recvSlot() to the sender.
  virtual void release() = 0;

  // kSuccess while the peer is alive; otherwise kRemoteError and a message naming it. Called
  // only from slow paths (after a wait has lasted a while).
  virtual Status health(std::string* why) = 0;

  // Marks both directions failed so a peer blocked on this link gives up promptly.
  virtual void poison() = 0;
  virtual bool poisoned() const = 0;

  // Transport name for logs ("local", "shm", "tcp", ...).
  virtual const char* transportName() const = 0;
};

}  // namespace weft::transport
