#include "transports/base/fifo.h"

#include <sys/uio.h>

#include <cstring>
#include <new>

#include "src/common/shared_region.h"
#include "transports/base/peer_maps.h"

namespace weft::transport {

static size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t fifoBytes(uint32_t slots, size_t slotBytes) {
  return alignUp(sizeof(FifoControl), 4096) + alignUp(slots * slotBytes, 4096);
}

void fifoInit(void* mem) {
  auto* ctl = new (mem) FifoControl;
  for (auto& i : ctl->info) i.seq.store(0, std::memory_order_relaxed);
  ctl->head.store(0, std::memory_order_relaxed);
  ctl->dataHead.store(0, std::memory_order_relaxed);
  ctl->poisoned.store(0, std::memory_order_relaxed);
  ctl->readerCanRead.store(0, std::memory_order_relaxed);
  ctl->senderProbeAddr.store(0, std::memory_order_relaxed);
  ctl->magic = kProbeMagic;
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
}

void FifoConnection::probePeer() {
  if (in_.ctl->readerCanRead.load(std::memory_order_acquire) != 0) return;
  uint64_t addr = in_.ctl->senderProbeAddr.load(std::memory_order_acquire);
  if (addr == 0) return;  // the peer has not connected yet; probe again on receive
  uint64_t word = 0;
  iovec local{&word, sizeof(word)};
  iovec remote{reinterpret_cast<void*>(addr), sizeof(word)};
  bool ok = process_vm_readv(p_.peerPid, &local, 1, &remote, 1, 0) == sizeof(word) &&
            word == kProbeMagic;
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
  if (p_.remote == RemoteMode::kDirect) peerReadsMe_ = true;
  else if (p_.remote == RemoteMode::kCma)
    peerReadsMe_ = out_.ctl->readerCanRead.load(std::memory_order_acquire) == 1;
  return peerReadsMe_;
}

void FifoConnection::postRemote(const void* addr, uint32_t bytes, uint32_t tag) {
  SharedRegion r;
  if (p_.remote == RemoteMode::kMapped && findSharedRegion(addr, bytes, &r)) {
    MappedRef ref{r.inode, reinterpret_cast<uint64_t>(r.base), r.bytes, r.fd, 0};
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
  *bytes = info.bytes;
  *tag = info.tag;
  *present = true;
  if (info.remote == 0) {
    if (info.bytes & kInlineFlag) {
      *bytes = info.bytes & ~kInlineFlag;
      return info.inlineData;
    }
    return in_.data + (recvDataHead_ % p_.slots) * p_.slotBytes;
  }
  if (p_.remote == RemoteMode::kDirect) return reinterpret_cast<const void*>(info.remote);
  if (info.bytes & kMappedFlag) {
    *bytes = info.bytes & ~kMappedFlag;
    MappedRef ref;
    std::memcpy(&ref, info.inlineData, sizeof ref);
    if (info.remote >= ref.base && info.remote + *bytes <= ref.base + ref.bytes) {
      // A message may be polled again before release(): acquire its mapping once.
      if (!mappedToken_ || mappedHead_ != recvHead_) {
        if (mappedToken_) releasePeerRegion(mappedToken_);
        mappedToken_ = nullptr;
        mappedLocal_ = acquirePeerRegion(p_.peerPid, ref, &mappedToken_);
        mappedHead_ = recvHead_;
      }
      if (mappedLocal_) return mappedLocal_ + (info.remote - ref.base);
    }
  }
  *remoteAddr = info.remote;  // not mapped: one process_vm_readv copy
  return nullptr;
}

void FifoConnection::readRemote(void* dst, uint64_t remoteAddr, size_t bytes) {
  char* out = static_cast<char*>(dst);
  while (bytes > 0) {
    iovec local{out, bytes};
    iovec remote{reinterpret_cast<void*>(remoteAddr), bytes};
    ssize_t n = process_vm_readv(p_.peerPid, &local, 1, &remote, 1, 0);
    if (n <= 0)
      fail(Status::kRemoteError, sysError("process_vm_readv from pid " + std::to_string(p_.peerPid) +
                                              " (shm single-copy)", n < 0 ? errno : EIO));
    out += n;
    remoteAddr += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void* FifoConnection::sendSlotFor(size_t bytes) {
  if (sendTail_ - sendHeadCache_ >= kMaxSlots) {
    sendHeadCache_ = out_.ctl->head.load(std::memory_order_acquire);
    if (sendTail_ - sendHeadCache_ >= kMaxSlots) return nullptr;
  }
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

void FifoConnection::release() {
  if (mappedToken_) {
    releasePeerRegion(mappedToken_);
    mappedToken_ = nullptr;
    mappedLocal_ = nullptr;
  }
  if (usesDataSlot(in_.ctl->info[recvHead_ % kMaxSlots]))
    in_.ctl->dataHead.store(++recvDataHead_, std::memory_order_release);
  ++recvHead_;
  in_.ctl->head.store(recvHead_, std::memory_order_release);
  if (p_.peerBell) p_.peerBell->ring();
}

void FifoConnection::poison() {
  out_.ctl->poisoned.store(1, std::memory_order_release);
  in_.ctl->poisoned.store(1, std::memory_order_release);
  if (p_.peerBell) p_.peerBell->ring();
}

bool FifoConnection::poisoned() const {
  return out_.ctl->poisoned.load(std::memory_order_acquire) != 0;
}

Status FifoConnection::health(std::string* why) {
  return p_.health ? p_.health(why) : Status::kSuccess;
}

}  // namespace weft::transport
