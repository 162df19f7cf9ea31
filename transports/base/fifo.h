// The slot FIFO shared by the memory-based transports (local, shm): one direction is a control
// block (head/tail counters on their own cache lines plus per-slot size/tag) and `slots` data
// slots. The sender owns `tail`, the receiver owns `head`; a slot is full while head <= i < tail.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "src/common/futex.h"
#include "transports/base/connection.h"

namespace weft::transport {

inline constexpr uint32_t kMaxSlots = 64;

struct SlotInfo {
  uint32_t bytes;
  uint32_t tag;
};

struct FifoControl {
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint32_t> poisoned;  // set by either side after a fatal error
  SlotInfo info[kMaxSlots];
};

// Bytes needed for one direction with `slots` slots of `slotBytes` (control block included).
size_t fifoBytes(uint32_t slots, size_t slotBytes);
// Initialises one direction's control block at `mem` (counters zero).
void fifoInit(void* mem);

struct FifoView {
  FifoControl* ctl = nullptr;
  char* data = nullptr;
};
FifoView fifoView(void* mem);

// A Connection over two FIFO directions in memory both ranks can address.
class FifoConnection : public Connection {
 public:
  struct Params {
    void* outMem = nullptr;       // direction me -> peer
    void* inMem = nullptr;        // direction peer -> me
    uint32_t slots = 4;
    size_t slotBytes = 0;
    Doorbell* peerBell = nullptr;  // rung after post/release so a sleeping peer wakes
    const char* name = "fifo";
    std::function<Status(std::string*)> health;  // liveness of the peer
    std::shared_ptr<void> keepAlive;             // owns the mapped memory
  };
  explicit FifoConnection(Params p);

  size_t slotBytes() const override { return p_.slotBytes; }
  void* sendSlot() override;
  void post(uint32_t bytes, uint32_t tag) override;
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override;
  void release() override;
  Status health(std::string* why) override;
  void poison() override;
  bool poisoned() const override;
  const char* transportName() const override { return p_.name; }

 private:
  Params p_;
  FifoView out_, in_;
  uint64_t sendTail_ = 0, sendHeadCache_ = 0;  // sender side (mine)
  uint64_t recvHead_ = 0;                      // receiver side (mine)
};

}  // namespace weft::transport
