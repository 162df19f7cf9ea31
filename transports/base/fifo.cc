#include "transports/base/fifo.h"

#include <new>

namespace weft::transport {

static size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

size_t fifoBytes(uint32_t slots, size_t slotBytes) {
  return alignUp(sizeof(FifoControl), 4096) + alignUp(slots * slotBytes, 4096);
}

void fifoInit(void* mem) {
  auto* ctl = new (mem) FifoControl;
  ctl->tail.store(0, std::memory_order_relaxed);
  ctl->head.store(0, std::memory_order_relaxed);
  ctl->poisoned.store(0, std::memory_order_relaxed);
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
  sendTail_ = out_.ctl->tail.load(std::memory_order_acquire);
  sendHeadCache_ = out_.ctl->head.load(std::memory_order_acquire);
  recvHead_ = in_.ctl->head.load(std::memory_order_acquire);
}

void* FifoConnection::sendSlot() {
  if (sendTail_ - sendHeadCache_ >= p_.slots) {
    sendHeadCache_ = out_.ctl->head.load(std::memory_order_acquire);
    if (sendTail_ - sendHeadCache_ >= p_.slots) return nullptr;
  }
  return out_.data + (sendTail_ % p_.slots) * p_.slotBytes;
}

void FifoConnection::post(uint32_t bytes, uint32_t tag) {
  out_.ctl->info[sendTail_ % p_.slots] = SlotInfo{bytes, tag};
  ++sendTail_;
  out_.ctl->tail.store(sendTail_, std::memory_order_release);
  if (p_.peerBell) p_.peerBell->ring();
}

const void* FifoConnection::recvSlot(uint32_t* bytes, uint32_t* tag) {
  if (in_.ctl->tail.load(std::memory_order_acquire) <= recvHead_) return nullptr;
  const SlotInfo info = in_.ctl->info[recvHead_ % p_.slots];
  *bytes = info.bytes;
  *tag = info.tag;
  return in_.data + (recvHead_ % p_.slots) * p_.slotBytes;
}

void FifoConnection::release() {
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
