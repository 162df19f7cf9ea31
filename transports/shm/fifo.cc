#include "transports/shm/fifo.h"

#include <sched.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

#include "src/common/clock.h"
#include "src/common/shared_region.h"
#include "transports/shm/descriptor.h"
#include "transports/shm/peer_maps.h"

namespace weft::transport {
namespace {

// Shared copies go in pieces this large: claiming one (an atomic on a line both sides touch)
// must be noise next to copying it, and a slot-sized slice must still split between both
// sides (slot sizes: perf/README.md, "Streaming stores").
constexpr uint64_t kHelpPieceBytes = 64 * 1024;
// claim = [offer id : 32][pieces : 16][next piece : 16]; pieces stay below the field's top, so
// the receiver's claims past the last piece never carry into the count.
constexpr uint64_t kMaxHelpPieces = 65000;
// A sender copies a piece in microseconds; this long means it is stopped, not slow.
constexpr uint64_t kHelperWaitNs = 30ull * 1000 * 1000 * 1000;

uint64_t packClaim(uint64_t id, uint64_t pieces, uint64_t next) {
  return id << 32 | pieces << 16 | next;
}
uint32_t claimId(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
uint32_t claimPieces(uint64_t c) { return static_cast<uint32_t>(c >> 16) & 0xffff; }
uint32_t claimNext(uint64_t c) { return static_cast<uint32_t>(c) & 0xffff; }

void copyPiece(char* dst, const char* src, uint64_t bytes, uint32_t piece, uint64_t pieceBytes,
               Store store) {
  const uint64_t off = piece * pieceBytes;
  copyElements(DataType::kUint8, dst + off, src + off, std::min(pieceBytes, bytes - off), nullptr,
               store);
}

// The MappedRef a peer maps this process's shared region holding [p, p+bytes) by.
bool sharedRegionRef(const void* p, size_t bytes, MappedRef* ref) {
  SharedRegion r;
  if (!findSharedRegion(p, bytes, &r)) return false;
  *ref = {r.inode, reinterpret_cast<uint64_t>(r.base), r.bytes, r.fd, 0};
  return true;
}

}  // namespace

static size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

void fifoInit(void* mem) {
  auto* ctl = new (mem) FifoControl;
  for (auto& i : ctl->info) i.seq.store(0, std::memory_order_relaxed);
  ctl->head.store(0, std::memory_order_relaxed);
  ctl->dataHead.store(0, std::memory_order_relaxed);
  ctl->poisoned.store(0, std::memory_order_relaxed);
  ctl->readerInside.store(0, std::memory_order_relaxed);
  ctl->writerInside.store(0, std::memory_order_relaxed);
  ctl->readerCanRead.store(0, std::memory_order_relaxed);
  ctl->senderProbeAddr.store(0, std::memory_order_relaxed);
  ctl->magic = kProbeMagic;
  ctl->help.claim.store(0, std::memory_order_relaxed);
  ctl->help.offer.store(0, std::memory_order_relaxed);
  ctl->help.helped.store(0, std::memory_order_relaxed);
  ctl->landing.version.store(0, std::memory_order_relaxed);
  ctl->landing.bytes.store(0, std::memory_order_relaxed);
}

FifoView fifoView(void* mem) {
  FifoView v;
  v.ctl = static_cast<FifoControl*>(mem);
  v.data = static_cast<char*>(mem) + alignUp(sizeof(FifoControl), 4096);
  return v;
}

FifoConnection::FifoConnection(Params p) : p_(std::move(p)) {
  out_ = fifoView(p_.outMem);
  in_ = fifoView(p_.inMem);
  // Resume from the counters in memory: a connection may be re-opened over a live FIFO.
  sendHeadCache_ = out_.ctl->head.load(std::memory_order_acquire);
  dataHeadCache_ = out_.ctl->dataHead.load(std::memory_order_acquire);
  sendTail_ = sendHeadCache_;
  dataTail_ = dataHeadCache_;
  for (;; ++sendTail_) {
    const SlotInfo& info = out_.ctl->info[sendTail_ % kMaxSlots];
    if (info.seq.load(std::memory_order_acquire) != sendTail_ + 1) break;
    if (usesDataSlot(info)) ++dataTail_;
  }
  offerId_ = claimId(in_.ctl->help.claim.load(std::memory_order_acquire));
  // An offer already in memory was made to an earlier connection over this FIFO, for memory
  // that may be gone: only offers made from now on count.
  landVersion_ = out_.ctl->landing.version.load(std::memory_order_acquire);
  recvHead_ = in_.ctl->head.load(std::memory_order_acquire);
  recvDataHead_ = in_.ctl->dataHead.load(std::memory_order_acquire);
  if (p_.remote == RemoteMode::kCma || p_.remote == RemoteMode::kMapped) {
    // Tell the receiver where to find a known word in our address space, and probe the peer's.
    out_.ctl->senderProbeAddr.store(reinterpret_cast<uint64_t>(&out_.ctl->magic),
                                    std::memory_order_release);
    probePeer();
  }
}

FifoConnection::~FifoConnection() {
  if (mappedToken_) releasePeerRegion(mappedToken_);
  if (landToken_) releasePeerRegion(landToken_);
}

void FifoConnection::probePeer() {
  if (in_.ctl->readerCanRead.load(std::memory_order_acquire) != 0) return;
  uint64_t addr = in_.ctl->senderProbeAddr.load(std::memory_order_acquire);
  if (addr == 0) return;  // the peer has not connected yet; probe again on receive
  uint64_t word = 0;
  iovec local{&word, sizeof(word)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(word)};
  bool ok =
      process_vm_readv(p_.peerPid, &local, 1, &remote, 1, 0) == sizeof(word) && word == kProbeMagic;
  in_.ctl->readerCanRead.store(ok ? 1 : 2, std::memory_order_release);
}

bool FifoConnection::peerCanRead(const void* addr, size_t bytes) {
  if (p_.remote != RemoteMode::kMapped) return peerCanReadMe();
  // The peer's probe read of our memory proves it may also open our descriptors.
  if (out_.ctl->readerCanRead.load(std::memory_order_acquire) != 1) return false;
  SharedRegion r;
  return findSharedRegion(addr, bytes, &r);
}

bool FifoConnection::peerCanReadMe() {
  if (peerReadsMe_) return true;
  if (p_.remote == RemoteMode::kDirect)
    peerReadsMe_ = true;
  else if (p_.remote == RemoteMode::kCma)
    peerReadsMe_ = out_.ctl->readerCanRead.load(std::memory_order_acquire) == 1;
  return peerReadsMe_;
}

void FifoConnection::postReference(const void* addr, uint32_t bytes, uint32_t tag) {
  MappedRef ref;
  if (p_.remote == RemoteMode::kMapped && sharedRegionRef(addr, bytes, &ref)) {
    static_assert(sizeof(ref) <= kInlineBytes);
    std::memcpy(out_.ctl->info[sendTail_ % kMaxSlots].inlineData, &ref, sizeof ref);
    sendInline_ = false;
    publish(bytes | kMappedFlag, tag, reinterpret_cast<uint64_t>(addr));
    return;
  }
  publish(bytes, tag, reinterpret_cast<uint64_t>(addr));
}

bool FifoConnection::consumed(uint64_t count) const {
  return out_.ctl->head.load(std::memory_order_acquire) >= count;
}

const void* FifoConnection::recvMessage(uint32_t* bytes, uint32_t* tag, uint64_t* remoteAddr,
                                        bool* present) {
  *remoteAddr = 0;
  *present = false;
  if ((p_.remote == RemoteMode::kCma || p_.remote == RemoteMode::kMapped) && !probed_) {
    probePeer();
    probed_ = in_.ctl->readerCanRead.load(std::memory_order_relaxed) != 0;
  }
  SlotInfo& info = in_.ctl->info[recvHead_ % kMaxSlots];
  if (info.seq.load(std::memory_order_acquire) != recvHead_ + 1) return nullptr;
  // The peer wrote the descriptor: read each field once and check it (descriptor.h).
  const uint32_t rawBytes = info.bytes;
  const uint64_t remote = info.remote;
  *tag = info.tag;
  *present = true;
  DescriptorLimits limits;
  limits.slotBytes = p_.slotBytes;
  limits.landingOpen = landDst_ != nullptr && landRecvAt_ <= landBytes_;
  limits.landingLeft = limits.landingOpen ? landBytes_ - landRecvAt_ : 0;
  limits.byReference = p_.remote != RemoteMode::kNone;
  Descriptor d;
  std::string why;
  if (!decodeDescriptor(rawBytes, remote, info.inlineData, limits, &d, &why))
    fail(Status::kInternalError, std::string(p_.name) + ": " + why);
  *bytes = d.bytes;
  switch (d.kind) {
    case MessageKind::kLanded:
      return landDst_ + landRecvAt_;
    case MessageKind::kInline:
      return info.inlineData;
    case MessageKind::kSlot:
      return in_.data + (recvDataHead_ % p_.slots) * p_.slotBytes;
    case MessageKind::kRemote:
    case MessageKind::kMapped:
      break;
  }
  if (p_.remote == RemoteMode::kDirect) {
    // The sender's memory, read in place: announce it, then check that the sender has not
    // given up (a sender that has may already have handed the memory back to its caller).
    // Both sides use seq_cst on these two words, so one of them sees the other's store.
    in_.ctl->readerInside.store(1, std::memory_order_seq_cst);
    readingPeer_ = true;
    if (in_.ctl->poisoned.load(std::memory_order_seq_cst) != 0) {
      doneReading();
      *present = false;  // the lane waits, and fails on the poison
      return nullptr;
    }
    return recvBase_ = reinterpret_cast<const char*>(remote);
  }
  if (d.kind == MessageKind::kMapped) {
    // A message may be polled again before release(): acquire its mapping once.
    if (!mappedToken_ || mappedHead_ != recvHead_) {
      if (mappedToken_) releasePeerRegion(mappedToken_);
      mappedToken_ = nullptr;
      mappedLocal_ = acquirePeerRegion(p_.peerPid, d.ref, &mappedToken_);
      mappedHead_ = recvHead_;
    }
    if (mappedLocal_) return recvBase_ = mappedLocal_ + d.regionOffset;
  }
  *remoteAddr = remote;  // not mapped: one process_vm_readv copy
  return nullptr;
}

void FifoConnection::readRemote(void* dst, uint64_t remoteAddr, size_t bytes) {
  char* out = static_cast<char*>(dst);
  while (bytes > 0) {
    iovec local{out, bytes};
    iovec remote{reinterpret_cast<void*>(remoteAddr), bytes};
    ssize_t n = process_vm_readv(p_.peerPid, &local, 1, &remote, 1, 0);
    if (n <= 0)
      fail(Status::kRemoteError, sysError("process_vm_readv from pid " +
                                              std::to_string(p_.peerPid) + " (shm single-copy)",
                                          n < 0 ? errno : EIO));
    out += n;
    remoteAddr += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

bool FifoConnection::descriptorFree() {
  if (sendTail_ - sendHeadCache_ < kMaxSlots) return true;
  sendHeadCache_ = out_.ctl->head.load(std::memory_order_acquire);
  return sendTail_ - sendHeadCache_ < kMaxSlots;
}

void* FifoConnection::sendSlotFor(size_t bytes) {
  if (!descriptorFree()) return nullptr;
  // Remember where the caller will write: post() marks the message inline only if it was.
  sendInline_ = bytes <= kInlineBytes;
  if (sendInline_) return out_.ctl->info[sendTail_ % kMaxSlots].inlineData;
  // Larger messages need a data slot (even one that then goes by reference: the check is cheap
  // and keeps the bound on messages in flight).
  if (dataTail_ - dataHeadCache_ >= p_.slots) {
    dataHeadCache_ = out_.ctl->dataHead.load(std::memory_order_acquire);
    if (dataTail_ - dataHeadCache_ >= p_.slots) return nullptr;
  }
  return out_.data + (dataTail_ % p_.slots) * p_.slotBytes;
}

void FifoConnection::post(uint32_t bytes, uint32_t tag) { publish(bytes, tag, 0); }

void FifoConnection::publish(uint32_t bytes, uint32_t tag, uint64_t remote) {
  SlotInfo& info = out_.ctl->info[sendTail_ % kMaxSlots];
  if (landLocal_) landSendAt_ += bytes & ~kSizeFlags;  // every message fills the adopted offer
  info.bytes = remote == 0 && sendInline_ && bytes <= kInlineBytes ? bytes | kInlineFlag : bytes;
  info.tag = tag;
  info.remote = remote;
  if (usesDataSlot(info)) ++dataTail_;
  ++sendTail_;
  info.seq.store(sendTail_, std::memory_order_release);  // last: publishes the whole line
  if (p_.peerBell) p_.peerBell->ring();
}

const void* FifoConnection::recvSlot(uint32_t* bytes, uint32_t* tag) {
  uint64_t remote = 0;
  bool present = false;
  const void* p = recvMessage(bytes, tag, &remote, &present);
  if (present && !p)
    fail(Status::kInternalError, "recvSlot cannot return a message from another address space");
  return p;
}

void FifoConnection::doneReading() {
  if (!readingPeer_) return;
  readingPeer_ = false;
  in_.ctl->readerInside.store(0, std::memory_order_release);
}

bool FifoConnection::awaitPeerOutOfMemory(std::chrono::milliseconds timeout) {
  if (p_.remote != RemoteMode::kDirect) return true;  // other processes read copies or mappings
  // Poisoned (the caller's poison names the cause; this only makes sure), and a seq_cst
  // read-modify-write of the poison word orders it before the load of the peer's flag (see
  // recvMessage and enterReceiverMemory): a peer that found it still 0 had set its flag, which
  // is seen here. Both directions: the peer may read this rank's memory (a message sent by
  // reference) or write it (a landing offered, a copy helped).
  for (FifoControl* ctl : {out_.ctl, in_.ctl}) {
    uint32_t healthy = 0;
    ctl->poisoned.compare_exchange_strong(healthy, kPoisonedUnknown, std::memory_order_seq_cst);
    ctl->poisoned.fetch_or(0, std::memory_order_seq_cst);
  }
  const Deadline deadline(timeout);
  return awaitFlagClear(out_.ctl->readerInside, deadline.remaining()) &&
         awaitFlagClear(in_.ctl->writerInside, deadline.remaining());
}

bool FifoConnection::awaitFlagClear(const std::atomic<uint32_t>& flag,
                                    std::chrono::milliseconds timeout) {
  const Deadline deadline(timeout);
  while (flag.load(std::memory_order_seq_cst) != 0) {
    if (deadline.expired()) return false;
    // The peer finishes the slice it is in (a copy or a reduction), then sees the poison.
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

bool FifoConnection::enterReceiverMemory() {
  if (writingPeer_) return true;
  out_.ctl->writerInside.store(1, std::memory_order_seq_cst);
  if (out_.ctl->poisoned.load(std::memory_order_seq_cst) != 0) {
    out_.ctl->writerInside.store(0, std::memory_order_release);
    return false;
  }
  writingPeer_ = true;
  return true;
}

void FifoConnection::leaveReceiverMemory() {
  if (!writingPeer_) return;
  writingPeer_ = false;
  out_.ctl->writerInside.store(0, std::memory_order_release);
}

void FifoConnection::release() {
  doneReading();
  if (mappedToken_) {
    releasePeerRegion(mappedToken_);
    mappedToken_ = nullptr;
    mappedLocal_ = nullptr;
  }
  const SlotInfo& info = in_.ctl->info[recvHead_ % kMaxSlots];
  if (landDst_ && recvHead_ >= landFirst_) {
    landRecvAt_ += info.bytes & ~kSizeFlags;
    if (landRecvAt_ >= landBytes_) landDst_ = nullptr;  // filled: later messages are ordinary
  }
  if (usesDataSlot(info)) in_.ctl->dataHead.store(++recvDataHead_, std::memory_order_release);
  ++recvHead_;
  in_.ctl->head.store(recvHead_, std::memory_order_release);
  if (p_.peerBell) p_.peerBell->ring();
}

void FifoConnection::poisonFor(int causeRank) {
  // The first poison of a direction sticks: it names the failure that came first.
  const uint32_t word = causeRank >= 0 ? static_cast<uint32_t>(causeRank) + 1 : kPoisonedUnknown;
  for (FifoControl* ctl : {out_.ctl, in_.ctl}) {
    uint32_t healthy = 0;
    ctl->poisoned.compare_exchange_strong(healthy, word, std::memory_order_acq_rel);
  }
  if (p_.peerBell) p_.peerBell->ring();
}

bool FifoConnection::poisoned() const {
  return out_.ctl->poisoned.load(std::memory_order_acquire) != 0 ||
         (p_.peerFailure && p_.peerFailure->load(std::memory_order_acquire) != 0);
}

int FifoConnection::poisonCause() const {
  const uint32_t link = out_.ctl->poisoned.load(std::memory_order_acquire);
  if (link != 0 && link != kPoisonedUnknown) return static_cast<int>(link) - 1;
  const uint32_t rank = p_.peerFailure ? p_.peerFailure->load(std::memory_order_acquire) : 0;
  return rank != 0 ? static_cast<int>(rank) - 1 : -1;
}

Status FifoConnection::health(std::string* why) {
  return p_.health ? p_.health(why) : Status::kSuccess;
}

}  // namespace weft::transport

namespace weft::transport {

void FifoConnection::land(void* dst, const void* src, size_t bytes, Store store) {
  if (dst == src) return;
  const SlotInfo& info = in_.ctl->info[recvHead_ % kMaxSlots];
  // Only a message the sender holds in place can be copied by both; and only when the sender
  // has a core of its own to copy with.
  if (info.remote != 0 && bytes >= 2 * kHelpPieceBytes && p_.shareCopy != 0 && !p_.sharedCores &&
      offerCopy(static_cast<char*>(dst), static_cast<const char*>(src), bytes, store))
    return;
  copyElements(DataType::kUint8, dst, src, bytes, nullptr, store);
}

bool FifoConnection::peerCanWrite(const void* dst, size_t bytes, MappedRef* region) const {
  *region = MappedRef{};
  if (p_.remote == RemoteMode::kDirect) return true;
  return p_.remote == RemoteMode::kMapped && sharedRegionRef(dst, bytes, region);
}

char* FifoConnection::mapReceiverMemory(const MappedRef& region, uint64_t at, uint64_t bytes,
                                        void** token, bool* denied) const {
  *denied = false;
  char* base = acquirePeerRegion(p_.peerPid, region, token, /*writable=*/true);
  if (!base) {
    *denied = true;
    return nullptr;
  }
  if (at < region.base || at + bytes > region.base + region.bytes) {
    releasePeerRegion(*token);
    *token = nullptr;
    return nullptr;
  }
  return base + (at - region.base);
}

bool FifoConnection::offerCopy(char* dst, const char* src, size_t bytes, Store store) {
  MappedRef region;
  if (!peerCanWrite(dst, bytes, &region)) return false;
  const uint64_t pieces = (bytes + kHelpPieceBytes - 1) / kHelpPieceBytes;
  if (pieces > kMaxHelpPieces) return false;
  HelpBoard& b = in_.ctl->help;
  if (++offerId_ == 0) ++offerId_;
  b.streaming = store == Store::kStreaming;
  b.pieceBytes = kHelpPieceBytes;
  b.bytes = bytes;
  // src may lie inside the message (a large one is taken a slice at a time).
  b.src = in_.ctl->info[recvHead_ % kMaxSlots].remote + static_cast<uint64_t>(src - recvBase_);
  b.dst = reinterpret_cast<uint64_t>(dst);
  b.dstRegion = region;
  b.helped.store(0, std::memory_order_relaxed);
  // The fields above are published by this store: a sender reads them only after claiming.
  b.claim.store(packClaim(offerId_, pieces, 0), std::memory_order_release);
  b.offer.store(offerId_, std::memory_order_release);
  if (p_.shareCopy == 2) {
    const uint64_t until = nowNs() + 1000000000ull;
    while (claimNext(b.claim.load(std::memory_order_acquire)) == 0 && nowNs() < until)
      sched_yield();
  }
  uint32_t mine = 0;
  for (;;) {
    const uint32_t i = claimNext(b.claim.fetch_add(1, std::memory_order_acq_rel));
    if (i >= pieces) break;
    copyPiece(dst, src, bytes, i, kHelpPieceBytes, store);
    ++mine;
  }
  b.offer.store(0, std::memory_order_relaxed);
  waitForHelper(static_cast<uint32_t>(pieces) - mine);
  return true;
}

void FifoConnection::waitForHelper(uint32_t pieces) {
  HelpBoard& b = in_.ctl->help;
  uint64_t spins = 0, since = 0, lastHealth = 0;
  while (b.helped.load(std::memory_order_acquire) < pieces) {
    if (++spins < 4096) {
      cpuRelax();
      continue;
    }
    sched_yield();  // the sender was preempted mid-piece; let it run
    const uint64_t now = nowNs();
    if (since == 0) since = lastHealth = now;
    if (now - lastHealth > 100ull * 1000 * 1000) {
      lastHealth = now;
      std::string why;
      if (health(&why) != Status::kSuccess) fail(Status::kRemoteError, why);
      if (poisoned())
        fail(Status::kRemoteError, "rank (pid " + std::to_string(p_.peerPid) +
                                       ") failed while copying its share of a message");
    }
    if (now - since > kHelperWaitNs)
      fail(Status::kRemoteError, "the sender (pid " + std::to_string(p_.peerPid) +
                                     ") claimed part of a copy and did not finish it in 30 s");
  }
}

bool FifoConnection::assist() {
  if (helpBroken_ || (p_.remote != RemoteMode::kDirect && p_.remote != RemoteMode::kMapped))
    return false;
  HelpBoard& b = out_.ctl->help;
  if (b.offer.load(std::memory_order_acquire) == 0) return false;
  // In the receiver's own address space, the copies must not outlive the receiver's call.
  if (p_.remote == RemoteMode::kDirect && !enterReceiverMemory()) return false;
  uint64_t c = b.claim.load(std::memory_order_acquire);
  bool copied = false;
  void* token = nullptr;
  char* dst = nullptr;
  uint32_t mappedFor = 0;  // the offer `dst` was derived for
  for (;;) {
    const uint32_t id = claimId(c);
    if (id == 0 || claimNext(c) >= claimPieces(c)) break;
    // Fields read before the claim are the offer's own if the claim below succeeds: the
    // receiver rewrites them only after every piece of this offer is claimed.
    const uint64_t src = b.src, bytes = b.bytes, pieceBytes = b.pieceBytes;
    const Store store = b.streaming ? Store::kStreaming : Store::kCached;
    if (mappedFor != id) {
      if (token) releasePeerRegion(token);
      token = nullptr;
      if (p_.remote == RemoteMode::kDirect) {
        dst = reinterpret_cast<char*>(b.dst);
      } else {
        bool denied = false;
        dst = mapReceiverMemory(b.dstRegion, b.dst, bytes, &token, &denied);
        if (!dst) {
          // No permission, say: the receiver copies alone from now on. (Unless the fields were
          // being rewritten for the next offer as they were read: then just stop here.)
          if (denied && b.claim.load(std::memory_order_acquire) == c) helpBroken_ = true;
          break;
        }
      }
      mappedFor = id;
    }
    if (!b.claim.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
      continue;  // c holds the current claim: retry, or see the offer is over
    copyPiece(dst, reinterpret_cast<const char*>(src), bytes, claimNext(c), pieceBytes, store);
    b.helped.fetch_add(1, std::memory_order_release);
    copied = true;
    c = b.claim.load(std::memory_order_acquire);
  }
  if (token) releasePeerRegion(token);
  leaveReceiverMemory();
  return copied;
}

}  // namespace weft::transport

namespace weft::transport {

bool FifoConnection::offerLanding(void* dst, size_t bytes, uint32_t tag) {
  LandingOffer& o = in_.ctl->landing;
  MappedRef r;
  if (!peerCanWrite(dst, bytes, &r)) return false;
  const uint64_t v = o.version.load(std::memory_order_relaxed);
  o.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  o.firstMsg.store(recvHead_, std::memory_order_relaxed);
  o.dst.store(reinterpret_cast<uint64_t>(dst), std::memory_order_relaxed);
  o.bytes.store(bytes, std::memory_order_relaxed);
  o.tag.store(tag, std::memory_order_relaxed);
  o.regionInode.store(r.inode, std::memory_order_relaxed);
  o.regionBase.store(r.base, std::memory_order_relaxed);
  o.regionBytes.store(r.bytes, std::memory_order_relaxed);
  o.regionFd.store(r.fd, std::memory_order_relaxed);
  o.version.store(v + 2, std::memory_order_release);
  landDst_ = static_cast<char*>(dst);
  landFirst_ = recvHead_;
  landBytes_ = bytes;
  landRecvAt_ = 0;
  return true;
}

void FifoConnection::adoptLanding(uint64_t version) {
  const LandingOffer& o = out_.ctl->landing;
  const uint64_t first = o.firstMsg.load(std::memory_order_relaxed);
  const uint64_t dst = o.dst.load(std::memory_order_relaxed);
  const uint64_t bytes = o.bytes.load(std::memory_order_relaxed);
  const uint32_t tag = o.tag.load(std::memory_order_relaxed);
  MappedRef region{o.regionInode.load(std::memory_order_relaxed),
                   o.regionBase.load(std::memory_order_relaxed),
                   o.regionBytes.load(std::memory_order_relaxed),
                   static_cast<int32_t>(o.regionFd.load(std::memory_order_relaxed)), 0};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (o.version.load(std::memory_order_relaxed) != version) return;  // rewritten meanwhile
  landVersion_ = version;
  landLocal_ = nullptr;
  if (landToken_) releasePeerRegion(landToken_);
  landToken_ = nullptr;
  // The receiver counts from its next message; those posted since still fill the offer first.
  if (first > sendTail_ || sendTail_ - first > kMaxSlots) return;
  uint64_t at = 0;
  for (uint64_t m = first; m < sendTail_; ++m)
    at += out_.ctl->info[m % kMaxSlots].bytes & ~kSizeFlags;
  if (at >= bytes) return;
  char* base = reinterpret_cast<char*>(dst);
  if (region.fd >= 0) {
    base = mapReceiverMemory(region, dst, bytes, &landToken_, &landBroken_);
    if (!base) return;  // landBroken_ when the mapping was refused: never try again
  }
  landLocal_ = base;
  landTag_ = tag;
  landEnd_ = bytes;
  landSendAt_ = at;
}

void* FifoConnection::landingFor(size_t bytes, uint32_t tag) {
  if (landBroken_ || (p_.remote != RemoteMode::kDirect && p_.remote != RemoteMode::kMapped))
    return nullptr;
  const uint64_t v = out_.ctl->landing.version.load(std::memory_order_acquire);
  if (v != landVersion_ && !(v & 1)) adoptLanding(v);
  if (!landLocal_ || landSendAt_ + bytes > landEnd_ || tag != landTag_ || !descriptorFree())
    return nullptr;
  // In the receiver's own address space, the write must not outlive the receiver's call.
  if (p_.remote == RemoteMode::kDirect && !enterReceiverMemory()) return nullptr;
  return landLocal_ + landSendAt_;
}

void FifoConnection::postLanded(uint32_t bytes, uint32_t tag) {
  sendInline_ = false;
  publish(bytes | kLandedFlag, tag, 0);
  leaveReceiverMemory();
}

}  // namespace weft::transport
