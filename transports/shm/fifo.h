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
#include "transports/shm/peer_maps.h"

namespace weft::transport {

inline constexpr uint32_t kMaxSlots = 64;

// 296: a 256-byte message still travels inline. Messages in data slots can run only `slots`
// ahead of the receiver, which costs where ranks take turns on the cores: they turn over that
// much more often. See perf/README.md, "256-byte inline messages".
inline constexpr uint32_t kInlineBytes = 296;
inline constexpr uint32_t kInlineFlag = 1u << 31;  // in SlotInfo::bytes: payload is inlineData
inline constexpr uint32_t kMappedFlag = 1u << 30;  // remote message; inlineData holds a MappedRef
inline constexpr uint32_t kLandedFlag =
    1u << 29;  // the sender wrote the data at the receiver's landing
inline constexpr uint32_t kSizeFlags = kInlineFlag | kMappedFlag | kLandedFlag;
inline constexpr uint32_t kMaxMessageBytes = kLandedFlag - 1;  // below the flag bits

struct alignas(64) SlotInfo {
  std::atomic<uint64_t> seq;  // message index + 1 once published
  uint32_t bytes;
  uint32_t tag;
  uint64_t remote;  // 0: data is in the slot (or inline); else its address in the sender
  unsigned char inlineData[kInlineBytes];
};
static_assert(sizeof(SlotInfo) == 320, "five cache lines per message descriptor");

inline constexpr uint32_t kPoisonedUnknown = 0xffffffffu;  // FifoControl::poisoned, no cause

inline constexpr uint64_t kProbeMagic = 0x57454654434d4131ull;  // "WEFTCMA1"

// The copy of a large rendezvous message split between its receiver and its sender: the
// receiver offers the pieces here, both claim them one at a time, and the sender writes its
// pieces straight into the receiver's destination (same address space, or a writable mapping
// of the receiver's ncclMemAlloc'd region). Lives in the sender -> receiver direction.
struct HelpBoard {
  alignas(64) std::atomic<uint64_t> claim;   // offer id, its piece count, next piece (fifo.cc)
  std::atomic<uint64_t> offer;               // the open offer's id, 0 when none; stored last
  alignas(64) std::atomic<uint32_t> helped;  // pieces the sender finished for the open offer
  alignas(64) uint32_t streaming;            // Store::kStreaming for the destination
  uint64_t pieceBytes;
  uint64_t bytes;
  uint64_t src;         // the message in the sender's address space
  uint64_t dst;         // the destination in the receiver's
  MappedRef dstRegion;  // the receiver's region holding dst (when the sender must map it)
};

// A receiver's offer of where its next messages go: from message `firstMsg` on, in order, they
// fill [dst, dst + bytes) of its memory, and a sender that can write there may store a message's
// data in place and publish only its descriptor (kLandedFlag): nobody copies it again. The
// receiver rewrites the offer under a sequence lock (`version` odd meanwhile); every field is an
// atomic so a sender reading during a rewrite reads no torn word, only a version to retry.
// Lives in the sender -> receiver direction.
struct LandingOffer {
  alignas(64) std::atomic<uint64_t> version;
  std::atomic<uint64_t> firstMsg;
  std::atomic<uint64_t> dst;  // in the receiver's address space
  std::atomic<uint64_t> bytes;
  std::atomic<uint32_t> tag;          // of the operation the receiver waits in; others never land
  std::atomic<uint64_t> regionInode;  // the receiver's ncclMemAlloc'd region holding dst ...
  std::atomic<uint64_t> regionBase;
  std::atomic<uint64_t> regionBytes;
  std::atomic<int64_t> regionFd;  // ... or -1: same address space
};

struct FifoControl {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> dataHead;
  // Set by either side after a fatal error: the failed rank + 1 (kPoisonedUnknown: not named).
  alignas(64) std::atomic<uint32_t> poisoned;
  // 1 while this direction's receiver reads a message in place in the sender's memory (same
  // address space): a sender that gives up waits for 0 before its caller may free the memory
  // (FifoConnection::awaitPeerOutOfMemory). Set only where `poisoned` was still 0 afterwards.
  std::atomic<uint32_t> readerInside;
  // 1 while this direction's sender writes the receiver's memory in place (a landing or a
  // helped copy, same address space): a receiver that gives up waits for 0 before its caller
  // may free its buffers. The same handshake with `poisoned` as readerInside.
  std::atomic<uint32_t> writerInside;
  std::atomic<uint32_t> readerCanRead;    // CMA probe by the receiver: 0 unknown, 1 yes, 2 no
  std::atomic<uint64_t> senderProbeAddr;  // where `magic` sits in the sender's address space
  uint64_t magic;
  SlotInfo info[kMaxSlots];
  HelpBoard help;
  LandingOffer landing;
};

// How a receiver reaches memory named by a rendezvous message: not at all, directly (same
// address space), with process_vm_readv (any memory of the sender), or by mapping the sender's
// shared regions (ncclMemAlloc'd memory only; others go through slots).
enum class RemoteMode { kNone, kDirect, kCma, kMapped };

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
