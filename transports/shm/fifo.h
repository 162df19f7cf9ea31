// The slot FIFO shared by the memory-based transports (local, shm): one direction is a control
// block and `slots` data slots. Each message has a five-cache-line descriptor whose `seq` (in its
// first line) is stored last with release order: the receiver polls that one line, and messages
// of up to kInlineBytes travel inside the descriptor, touching only the lines they fill (a
// message of up to 40 bytes keeps data and flag in one line, like NCCL's LL protocol; up to 296
// bytes saves the data slot's extra lines and its head update). Descriptors form a ring of
// kMaxSlots, data slots a ring of their own: inline and by-reference messages take no data slot,
// so small messages can run up to kMaxSlots ahead (a broadcast root, for one) while the data
// slots stay few. The receiver owns `head` (messages released) and `dataHead` (data slots).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "src/common/doorbell.h"
#include "transports/base/capabilities.h"
#include "transports/base/connection.h"
#include "transports/shm/fifo_layout.h"
#include "transports/shm/peer_maps.h"

namespace weft::transport {

// Initialises one direction's control block at `mem` (counters zero).
void fifoInit(void* mem);

struct FifoView {
  FifoControl* ctl = nullptr;
  char* data = nullptr;
};
FifoView fifoView(void* mem);

// A Connection over two FIFO directions in memory both ranks can address.
class FifoConnection : public Connection, public ReferenceSends, public PeerMemory {
 public:
  struct Params {
    void* outMem = nullptr;  // direction me -> peer
    void* inMem = nullptr;   // direction peer -> me
    uint32_t slots = 4;
    size_t slotBytes = 0;
    Doorbell* peerBell = nullptr;  // rung after post/release so a sleeping peer wakes
    // The peer's failure word (rank_bell.h), or null; kept mapped by `keepAlive`.
    const std::atomic<uint32_t>* peerFailure = nullptr;
    const char* name = "fifo";
    std::function<Status(std::string*)> health;  // liveness of the peer
    std::shared_ptr<void> keepAlive;             // owns the mapped memory
    RemoteMode remote = RemoteMode::kNone;
    int peerPid = 0;  // for CMA reads and mapped regions
    // Shared copies (Tuning::shareCopy): 0 off, 1 on, 2 on and the receiver waits (up to a
    // second) for the sender's first claim, which makes the sender's share certain for tests on
    // a loaded machine. Never where ranks share cores: the sender has no core of its own.
    int shareCopy = 1;
    bool sharedCores = false;
  };
  explicit FifoConnection(Params p);
  ~FifoConnection() override;

  size_t slotBytes() const override { return p_.slotBytes; }
  void* sendSlot() override { return sendSlotFor(p_.slotBytes); }
  void* sendSlotFor(size_t bytes) override;
  void post(uint32_t bytes, uint32_t tag) override;
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override;
  void release() override;
  void doneReading() override;
  bool awaitPeerOutOfMemory(std::chrono::milliseconds timeout) override;
  Status health(std::string* why) override;
  void poison() override { poisonFor(-1); }
  void poisonFor(int causeRank) override;
  bool poisoned() const override;
  int poisonCause() const override;

  const char* transportName() const override { return p_.name; }
  ReferenceSends* referenceSends() override { return this; }
  PeerMemory* peerMemory() override { return this; }

  // ReferenceSends.
  bool peerCanRead(const void* addr, size_t bytes) override;
  void postReference(const void* addr, uint32_t bytes, uint32_t tag) override;
  size_t maxReferenceBytes() const override { return kMaxMessageBytes; }
  uint64_t postedCount() const override { return sendTail_; }
  bool consumed(uint64_t count) const override;
  const void* recvMessage(uint32_t* bytes, uint32_t* tag, uint64_t* remoteAddr,
                          bool* present) override;
  // PeerMemory.
  void readRemote(void* dst, uint64_t remoteAddr, size_t bytes) override;
  void land(void* dst, const void* src, size_t bytes, Store store) override;
  bool assist() override;
  bool offerLanding(void* dst, size_t bytes, uint32_t tag) override;
  void* landingFor(size_t bytes, uint32_t tag) override;
  void postLanded(uint32_t bytes, uint32_t tag) override;
  void withdrawLanding() override { leaveReceiverMemory(); }

 private:
  // Sender, same address space: announces a write into the receiver's memory; false (and
  // nothing announced) where the receiver already gave up.
  bool enterReceiverMemory();
  void leaveReceiverMemory();
  // Waits until `flag` of a direction this side poisoned is 0; false at the deadline.
  static bool awaitFlagClear(const std::atomic<uint32_t>& flag, std::chrono::milliseconds timeout);
  Params p_;
  FifoView out_, in_;
  uint64_t sendTail_ = 0, sendHeadCache_ = 0;  // sender side (mine): messages
  uint64_t dataTail_ = 0, dataHeadCache_ = 0;  // ... and data slots
  uint64_t recvHead_ = 0, recvDataHead_ = 0;   // receiver side (mine)
  bool peerReadsMe_ = false;                   // cached peerCanReadMe() once true
  // Whether the receiver can read this process's memory at all (CMA probe, or one address
  // space); peerCanRead then asks about a given range.
  bool peerCanReadMe();
  bool probed_ = false;          // CMA probe of the peer settled
  bool sendInline_ = false;      // the last sendSlotFor() handed out inlineData
  void* mappedToken_ = nullptr;  // mapping the message at mappedHead_ is read through
  const char* mappedLocal_ = nullptr;
  const char* recvBase_ = nullptr;  // where the last by-reference message received lies here
  bool readingPeer_ = false;        // in_.ctl->readerInside is set by this side
  bool writingPeer_ = false;        // out_.ctl->writerInside is set by this side
  uint64_t mappedHead_ = 0;
  uint32_t offerId_ = 0;     // receiver: the last offer made on the help board
  bool helpBroken_ = false;  // sender: the receiver's memory cannot be mapped; never help
  // Receiver: the landing offered last; messages from landFirst_ on fill it, landRecvAt_ so far.
  char* landDst_ = nullptr;
  uint64_t landFirst_ = 0, landBytes_ = 0, landRecvAt_ = 0;
  // Sender: the offer adopted (its version), where it is mapped here, and bytes posted into it.
  uint64_t landVersion_ = 0;
  char* landLocal_ = nullptr;
  uint64_t landEnd_ = 0, landSendAt_ = 0;
  uint32_t landTag_ = 0;
  void* landToken_ = nullptr;
  bool landBroken_ = false;  // sender: the receiver's memory cannot be mapped; never land
  void adoptLanding(uint64_t version);
  void publish(uint32_t bytes, uint32_t tag, uint64_t remote);
  bool offerCopy(char* dst, const char* src, size_t bytes, Store store);
  void waitForHelper(uint32_t pieces);
  static bool usesDataSlot(const SlotInfo& info) {
    return info.remote == 0 && !(info.bytes & (kInlineFlag | kLandedFlag));
  }
  void probePeer();
  // Receiver side: whether the sender can write [dst, dst+bytes), and how it reaches it (fd -1:
  // the same address space; else this process's ncclMemAlloc'd region holding it).
  bool peerCanWrite(const void* dst, size_t bytes, MappedRef* region) const;
  // Sender side: maps the receiver's region writable and returns where its address `at` lies
  // here, or nullptr (*denied when the mapping itself was refused); *token keeps it mapped.
  char* mapReceiverMemory(const MappedRef& region, uint64_t at, uint64_t bytes, void** token,
                          bool* denied) const;
  // Sender side: a message descriptor is free to post into.
  bool descriptorFree();
};

}  // namespace weft::transport
