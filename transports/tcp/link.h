// One tcp connection between two ranks on one channel: local send and receive slot rings, like
// the memory FIFOs, and several sockets that the progress engine drains the send ring into and
// fills the receive ring from. Each slot travels as 1..sockets stripes, one frame per socket, so a
// large slot uses every socket at once; the receiver reassembles stripes by sequence number.
//
// Threads: the executor calls the slot methods (sendSlot/post, recvSlot/release); a worker
// thread runs service() for each socket. post() also writes inline when the socket has room,
// which saves a thread hand-off on small messages.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/common/doorbell.h"
#include "src/common/error.h"
#include "transports/base/capabilities.h"
#include "transports/base/connection.h"
#include "transports/tcp/engine.h"
#include "transports/tcp/wire.h"

namespace weft::tcp {

struct LinkParams {
  uint64_t commHash = 0;
  int rank = 0;
  int peer = 0;
  int channel = 0;
  uint32_t slots = 8;
  uint64_t slotBytes = 0;
  uint32_t sockets = 1;
  uint64_t minPart = 65536;
  Doorbell* bell = nullptr;  // the local rank's doorbell
  // The peer's failure word (transports/shm/rank_bell.h) where it runs on this host, else null.
  const std::atomic<uint32_t>* peerFailure = nullptr;
  // The peer's process where it runs on this host, else 0: a peer killed before its sockets
  // reached this side leaves nothing to read EOF from, so health() asks whether it still runs.
  int peerPid = 0;
  bool active = false;                   // this side opens the sockets (the lower rank)
  bootstrap::SocketAddress peerAddress;  // where the peer listens (active side)
  uint8_t peerToken[kTokenBytes] = {};   // what the peer's endpoint expects (active side)
  bool lowat = true;                     // wake the progress thread once per stripe (SO_RCVLOWAT)
  bool executorReads = false;            // a waiting rank reads its sockets itself (WEFT_TCP_POLL)
};

class Link : public SocketSink, public std::enable_shared_from_this<Link> {
 public:
  explicit Link(const LinkParams& p);
  ~Link();
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Active side: opens the sockets (non-blocking connects; the hello goes first).
  void start();
  // Passive side: a socket that passed the handshake for stripe index `index`.
  void attach(const Hello& hello, int fd) override;

  // Executor side (one thread).
  void* sendSlot();
  void post(uint32_t bytes, uint32_t tag) { postFrom(nullptr, bytes, tag); }
  // Like post, but the bytes are sent from `data` (the caller's memory, untouched until
  // sentCount() passes this message) instead of the slot: saves the copy into the slot.
  void postFrom(const void* data, uint32_t bytes, uint32_t tag);
  uint64_t postedCount() const { return sendTail_; }
  uint64_t sentCount() const { return sendDone_.load(std::memory_order_acquire); }
  const void* recvSlot(uint32_t* bytes, uint32_t* tag);
  void release();
  Status health(std::string* why);
  void poison();
  bool poisoned() const;
  // The rank the peer named as the cause of its failure (ranks on this host only), else -1.
  int poisonCause() const;
  bool peerEnded() const;
  uint64_t slotBytes() const { return p_.slotBytes; }

  // Waits until every posted slot is in the kernel (or the link failed, or the deadline);
  // then stops watching the sockets, and returns once no worker drives the link any more: from
  // then on it never touches the rank's doorbell, which may be unmapped. The descriptors close
  // when the last owner lets go.
  void close(std::chrono::milliseconds timeout);

  // Worker side.
  void service(int index, uint32_t events);

  std::string peerName() const;
  // Counters and per-socket state, for diagnostics.
  std::string describe();

 private:
  struct OutPart {
    uint8_t header[kFrameHeaderBytes];
    const char* data = nullptr;
    uint32_t length = 0;
    uint64_t seq = 0;
    size_t sent = 0;  // of header + payload
  };
  enum class SockState : int { kNone, kConnecting, kReady, kDead };
  struct Sock {
    int fd = -1;
    Worker* worker = nullptr;
    uint64_t id = 0;
    std::atomic<int> state{static_cast<int>(SockState::kNone)};
    // Send side, under sendMu.
    std::mutex sendMu;
    std::deque<OutPart> queue;
    uint8_t hello[kHelloBytes] = {};
    size_t helloLeft = 0;
    // Receive side, worker thread only.
    uint8_t header[kFrameHeaderBytes] = {};
    size_t headerGot = 0;
    bool inPayload = false;
    FrameHeader frame;
    size_t payloadGot = 0;
    uint64_t lastSeq = 0;
    std::atomic<bool> parked{false};
    bool eof = false;  // the peer ended this socket at a frame boundary
    // Who reads: a worker or the executor, one at a time (see drive()).
    std::atomic<bool> reading{false};
    std::atomic<bool> wantRead{false};
    int lowat = 1;        // SO_RCVLOWAT now set
    size_t maxLowat = 1;  // largest SO_RCVLOWAT this socket may use
  };
  struct RecvMeta {
    uint64_t seq = UINT64_MAX;
    uint32_t total = 0;
    uint32_t tag = 0;
    uint32_t parts = 0;
    uint64_t mask = 0;
    bool complete = false;
  };

  void registerSocket(int index);
  void finishConnect(Sock& s);
  // Writes what it can; sendMu held. False when the socket failed.
  bool writeSome(Sock& s);
  // Reads what socket `index` has, from whichever thread calls; a reader that finds another
  // already at work leaves it a note to read once more, so no readiness is lost.
  void drive(int index);
  void readSome(int index);
  bool acceptFrame(Sock& s, std::string* why);
  void partReceived(Sock& s);
  void partSent(uint64_t seq);
  void fail(const std::string& why);
  void ring();
  void kickParked();

  LinkParams p_;
  std::vector<char> sendBuf_, recvBuf_;
  std::vector<std::unique_ptr<Sock>> socks_;

  // Send ring: the executor owns sendTail_; workers advance sendDone_.
  uint64_t sendTail_ = 0;
  std::atomic<uint64_t> sendPosted_{0};
  std::atomic<uint64_t> sendDone_{0};
  std::unique_ptr<std::atomic<uint32_t>[]> partsLeft_;  // per slot index
  std::mutex doneMu_;

  // Receive ring: the executor owns recvHead_ (published for the window check); workers fill
  // slots and advance recvReady_.
  std::atomic<uint64_t> recvHead_{0};
  std::atomic<uint64_t> recvReady_{0};
  std::vector<RecvMeta> meta_;
  std::mutex metaMu_;
  std::atomic<int> parkedCount_{0};

  std::atomic<bool> poisoned_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> peerClosed_{false};  // every socket ended cleanly: nothing more will arrive
  std::atomic<uint32_t> eofCount_{0};
  std::atomic<bool> closing_{false};
  // Set by close() before it stops watching the sockets: a socket handed over later (attach)
  // is closed instead of watched, so no worker drives the link once close() returned.
  std::mutex detachMu_;
  bool detached_ = false;
  mutable std::mutex whyMu_;
  std::string why_;
  uint64_t serial_ = 0;
  bool executorReads_ = false;  // WEFT_TCP_POLL
  uint32_t helloSocketsSeen_ = 0;
};

// The executor's view of a Link.
class TcpConnection : public transport::Connection, public transport::ReferenceSends {
 public:
  TcpConnection(std::shared_ptr<Link> link, std::chrono::milliseconds closeTimeout)
      : link_(std::move(link)), closeTimeout_(closeTimeout) {}
  ~TcpConnection() override { link_->close(closeTimeout_); }

  size_t slotBytes() const override { return link_->slotBytes(); }
  void* sendSlot() override { return link_->sendSlot(); }
  void post(uint32_t bytes, uint32_t tag) override { link_->post(bytes, tag); }
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override {
    return link_->recvSlot(bytes, tag);
  }
  void release() override { link_->release(); }
  Status health(std::string* why) override { return link_->health(why); }
  void poison() override { link_->poison(); }
  bool poisoned() const override { return link_->poisoned(); }
  int poisonCause() const override { return link_->poisonCause(); }
  bool peerEnded() const override { return link_->peerEnded(); }
  const char* transportName() const override { return "tcp"; }
  transport::ReferenceSends* referenceSends() override { return this; }

  // Sends by reference: the engine writes the message into the socket straight from the
  // caller's buffer, which is free again once it is in the kernel (consumed()). The receiver
  // gets it in a slot, so a message holds at most one.
  bool peerCanRead(const void*, size_t) override { return true; }
  void postReference(const void* addr, uint32_t bytes, uint32_t tag) override {
    link_->postFrom(addr, bytes, tag);
  }
  size_t maxReferenceBytes() const override { return link_->slotBytes(); }
  uint64_t postedCount() const override { return link_->postedCount(); }
  bool consumed(uint64_t count) const override { return link_->sentCount() >= count; }

  Link& link() { return *link_; }

 private:
  std::shared_ptr<Link> link_;
  std::chrono::milliseconds closeTimeout_;
};

}  // namespace weft::tcp
