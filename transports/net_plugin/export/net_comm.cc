#include "transports/net_plugin/export/net_comm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "src/common/log.h"
#include "transports/base/capabilities.h"

namespace weft::netplugin {
namespace {

constexpr uint32_t kHeaderTag = 0x4e504831;  // "1HPN": a message's header slot
constexpr uint32_t kDataTag = 0x4e504431;    // "1DPN": a piece of its bytes
constexpr uint32_t kMagic = 0x5746544e;      // "NTFW"
// How often a comm that is waiting asks its connection about the peer.
constexpr auto kHealthEvery = std::chrono::milliseconds(50);

struct WireHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};
static_assert(sizeof(WireHeader) == 16);

}  // namespace

NetComm::NetComm(std::unique_ptr<transport::Connection> conn, bool sender, std::string peer,
                 std::shared_ptr<void> keepAlive)
    : conn_(std::move(conn)),
      sender_(sender),
      peer_(std::move(peer)),
      keepAlive_(std::move(keepAlive)) {
  // Sends by reference only where the receiver gets them in its slots like any message (tcp);
  // references that a receiver reads from the sender's memory (ib zero copy) need recvMessage(),
  // which this comm does not use.
  if (std::string(conn_->transportName()) == "tcp") refs_ = conn_->referenceSends();
  for (auto& r : requests_) r.comm = this;
}

NetComm::~NetComm() {
  conn_.reset();  // closes the link (waits, bounded, for posted data to leave)
}

NetRequest* NetComm::allocate() {
  for (auto& r : requests_)
    if (!r.inUse) {
      r = NetRequest{};
      r.comm = this;
      r.inUse = true;
      return &r;
    }
  return nullptr;
}

void NetComm::fail(const std::string& why) {
  if (!error_.empty()) return;
  error_ = why;
  WEFT_WARN(NET, "weft net plugin: %s: %s", peer_.c_str(), why.c_str());
  conn_->poison();
}

ncclNetResult_t NetComm::isend(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (!sender_) return kNcclNetInvalidUsage;
  if (!error_.empty()) return kNcclNetRemoteError;
  if (size > 0 && !data) return kNcclNetInvalidArgument;
  NetRequest* r = allocate();
  if (!r) return kNcclNetSuccess;
  r->send = true;
  r->data = static_cast<char*>(data);
  r->capacity = r->size = size;
  r->tag = tag;
  queue_.push_back(r);
  progress();
  *request = r;
  return kNcclNetSuccess;
}

ncclNetResult_t NetComm::irecv(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (sender_) return kNcclNetInvalidUsage;
  if (!error_.empty()) return kNcclNetRemoteError;
  if (size > 0 && !data) return kNcclNetInvalidArgument;
  NetRequest* r = allocate();
  if (!r) return kNcclNetSuccess;
  r->data = static_cast<char*>(data);
  r->capacity = size;
  r->tag = tag;
  queue_.push_back(r);
  progress();
  *request = r;
  return kNcclNetSuccess;
}

bool NetComm::progressSends() {
  while (!queue_.empty()) {
    NetRequest* r = queue_.front();
    if (!r->headerDone) {
      void* slot = conn_->sendSlotFor(sizeof(WireHeader));
      if (!slot) return true;
      WireHeader h{kMagic, r->tag, r->size};
      std::memcpy(slot, &h, sizeof(h));
      conn_->post(sizeof(h), kHeaderTag);
      r->headerDone = true;
    }
    // A piece fills a slot (a reference may not exceed one either: maxReferenceBytes()).
    const size_t piece =
        refs_ ? std::min(conn_->slotBytes(), refs_->maxReferenceBytes()) : conn_->slotBytes();
    while (r->moved < r->size) {
      const size_t n = std::min(piece, r->size - r->moved);
      void* slot = conn_->sendSlotFor(n);
      if (!slot) return true;
      if (refs_ && refs_->peerCanRead(r->data + r->moved, n)) {
        refs_->postReference(r->data + r->moved, static_cast<uint32_t>(n), kDataTag);
        r->lastPost = refs_->postedCount();
      } else {
        std::memcpy(slot, r->data + r->moved, n);
        conn_->post(static_cast<uint32_t>(n), kDataTag);
      }
      r->moved += n;
    }
    queue_.pop_front();
  }
  return true;
}

bool NetComm::progressReceives() {
  while (!queue_.empty()) {
    NetRequest* r = queue_.front();
    uint32_t bytes = 0, tag = 0;
    const void* p = conn_->recvSlot(&bytes, &tag);
    if (!p) return true;
    if (!r->headerDone) {
      WireHeader h{};
      if (tag != kHeaderTag || bytes != sizeof(h))
        return fail("sent " + std::to_string(bytes) + " B where a message header belongs"), false;
      std::memcpy(&h, p, sizeof(h));
      conn_->release();
      if (h.magic != kMagic) return fail("sent a header with a wrong magic"), false;
      if (h.tag != r->tag)
        return fail("sent a message with tag " + std::to_string(h.tag) +
                    " where the receive posted tag " + std::to_string(r->tag)),
               false;
      if (h.size > r->capacity)
        return fail("sent a message of " + std::to_string(h.size) + " B into a receive of " +
                    std::to_string(r->capacity) + " B"),
               false;
      r->headerDone = true;
      r->size = h.size;
    } else {
      if (tag != kDataTag || bytes == 0 || bytes > r->size - r->moved)
        return fail("sent a piece of " + std::to_string(bytes) + " B past its message's " +
                    std::to_string(r->size) + " B"),
               false;
      std::memcpy(r->data + r->moved, p, bytes);
      conn_->release();
      r->moved += bytes;
    }
    if (r->moved == r->size) {
      r->complete = true;
      queue_.pop_front();
    }
  }
  return true;
}

bool NetComm::progress() {
  if (!error_.empty()) return false;
  if (conn_->poisoned()) {
    std::string why;
    if (conn_->health(&why) == Status::kSuccess) why = "the connection was poisoned";
    fail(why);
    return false;
  }
  return sender_ ? progressSends() : progressReceives();
}

ncclNetResult_t NetComm::test(NetRequest* r, int* done, int* size) {
  *done = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!r->inUse) return kNcclNetInvalidArgument;
  progress();
  bool finished = r->send ? r->headerDone && r->moved == r->size &&
                                (!refs_ || r->size == 0 || refs_->consumed(r->lastPost))
                          : r->complete;
  if (!finished && error_.empty()) {
    auto now = std::chrono::steady_clock::now();
    if (now - lastHealth_ >= kHealthEvery) {
      lastHealth_ = now;
      std::string why;
      if (conn_->health(&why) != Status::kSuccess) fail(why);
    }
  }
  if (!finished && !error_.empty()) {
    r->inUse = false;
    std::erase(queue_, r);
    return kNcclNetRemoteError;
  }
  if (!finished) return kNcclNetSuccess;
  *done = 1;
  if (size) *size = static_cast<int>(std::min<size_t>(r->size, INT32_MAX));
  r->inUse = false;
  return kNcclNetSuccess;
}

}  // namespace weft::netplugin
