// One ib connection: RC queue pairs to one peer on one channel, both directions.
//
// Each side registers a FIFO of `slots` receive slots; a message is one RDMA WRITE WITH
// IMMEDIATE (split over the queue pairs when there are several) from the sender's matching send
// slot straight into the receiver's slot. A slot starts with a 16-byte header (tag, bytes,
// sequence) that the receiver checks before it hands the data over; the immediate names the slot
// and the number of parts. Releasing a slot returns a credit: a zero-byte SEND WITH IMMEDIATE
// carrying the count of released slots. Queue pair numbers, GIDs and the receive FIFO's address
// and rkey travel as the setup message over the control socket (transports/remote/
// control_connection.h: the skeleton of the connection, poisoning and goodbye included), which
// also carries kReady once this side's queue pairs are connected. The process's ib progress
// thread (progress.h) drives every connection in the background, and the executor's calls drive
// it too; a mutex serialises the two. Messages written before the setup finished wait in their
// send slots and go out once the queue pairs are connected.
//
// Beyond slots (capabilities.h): a message may be sent by reference, written from the caller's
// buffer (registered on first use through the protection domain's cache, mr_cache.h) instead of
// its send slot; and a receiver may offer its destination (a landing, wire.h), into which the
// sender then writes the next messages straight from their source, so neither side copies.
// ncclCommRegister registers buffers ahead (MemoryRegistration).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/base/capabilities.h"
#include "transports/base/connection.h"
#include "transports/base/registration.h"
#include "transports/ib/devices.h"
#include "transports/ib/mr_cache.h"
#include "transports/ib/progress.h"
#include "transports/ib/wire.h"
#include "transports/remote/control_connection.h"

namespace weft::ib {

struct ConnectionParams : remote::ConnectionParams {
  int qps = 1;
  // Registrations of user buffers kept once unused (mr_cache.h); negative: leave the cache's.
  int64_t mrRetainedBytes = -1;
};

// Tests only: changes the setup message each rank of this process sends before it goes out (a
// forged rkey, address or shape), to check that the peer fails the connection and writes nowhere
// else. Null restores the default. Set it while no connection is being set up.
void setSetupForgerForTesting(void (*forge)(int rank, QpInfo*));

class IbConnection : public remote::ControlConnection,
                     public transport::ReferenceSends,
                     public transport::PeerMemory,
                     public transport::MemoryRegistration,
                     public DeviceClient {
 public:
  IbConnection(const ConnectionParams& p, const Port& port);
  ~IbConnection() override;

  void* sendSlot() override;
  void post(uint32_t bytes, uint32_t tag) override;
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override;
  void release() override;
  const char* transportName() const override { return "ib"; }
  // After a given-up operation: stops the queue pairs where the peer may still write into our
  // landing or our writes may still read the caller's buffers (the connection fails).
  bool awaitPeerOutOfMemory(std::chrono::milliseconds timeout) override;
  transport::ReferenceSends* referenceSends() override { return this; }
  transport::PeerMemory* peerMemory() override { return this; }

  // ReferenceSends: a message of up to a slot written from registered user memory.
  bool peerCanRead(const void* addr, size_t bytes) override;
  void postReference(const void* addr, uint32_t bytes, uint32_t tag) override;
  size_t maxReferenceBytes() const override { return p_.slotBytes; }
  uint64_t postedCount() const override;
  bool consumed(uint64_t count) const override;

  // PeerMemory: landings only (the sender writes into them from postReference or its slot, so
  // landingFor offers no mapped pointer); no remote reads.
  void readRemote(void* dst, uint64_t remoteAddr, size_t bytes) override;
  void land(void* dst, const void* src, size_t bytes, Store store) override;
  bool assist() override { return false; }
  bool offerLanding(void* dst, size_t bytes, uint32_t tag) override;
  void* landingFor(size_t, uint32_t) override { return nullptr; }
  void postLanded(uint32_t bytes, uint32_t tag) override;

  // MemoryRegistration (ncclCommRegister).
  bool registerMemory(const void* owner, const void* addr, size_t bytes, std::string* why) override;
  void deregisterMemory(const void* owner, const void* addr, size_t bytes) override;

  // DeviceClient (progress.h).
  ibv_context* deviceContext() const override { return port_.context; }
  int portNumber() const override { return port_.port; }
  bool ownsQp(const ibv_qp* qp) const override;
  bool ownsCq(const ibv_cq* cq) const override { return cq == cq_; }
  void failFromDevice(const std::string& why) override;

  // Tests only: posts a zero-byte RDMA WRITE WITH IMMEDIATE carrying `imm` into the peer's
  // FIFO, as a broken or hostile peer would (sendControlBytesForTesting: control_connection.h).
  void postImmediateForTesting(uint32_t imm);
  // Tests only: writes `offer` into mailbox entry `entry` of the peer as a hostile receiver
  // would; whether this side holds an offer from the peer that messages can still land in; the
  // registration cache this connection uses.
  void postOfferForTesting(const LandingOffer& offer, uint32_t entry);
  bool peerOfferActiveForTesting();
  MrCache& mrCacheForTesting() { return *cache_; }

 private:
  // ControlConnection: the setup message is this side's QpInfo; kReady is ib's control byte.
  bool progress() override;
  void backgroundTurn() override;
  std::vector<uint8_t> ownSetup() override;
  bool onPeerSetup(const uint8_t* message) override;
  bool onControlByte(char c) override;
  void transportFds(std::vector<int>* fds) override;

  struct Buffer {
    void* base = nullptr;
    size_t bytes = 0;
    ibv_mr* mr = nullptr;
  };
  size_t stride() const { return kHeaderBytes + p_.slotBytes; }
  void flushPosts();
  // Posts message `seq`'s writes (to its slot, or into the peer's landing); false when the
  // queues have no room yet.
  bool wireMessage(uint64_t seq);
  void writeHeader(uint64_t seq, uint32_t bytes, uint32_t tag);
  // Queues the next message (under mu_): its header in its send slot, its data at `from` (lkey;
  // `region` held until its writes complete, or null), then wires what it can.
  void queueMessage(uint32_t bytes, uint32_t tag, uint64_t from, uint32_t lkey,
                    const MrCache::Region* region);
  void onSendCompletion(uint64_t wrId);
  void onOffer(uint32_t entry);
  bool postWrite(int qp, uint64_t wrId, uint64_t localAddr, uint32_t lkey, uint64_t length,
                 uint64_t remoteAddr, uint32_t rkey, bool withImm, uint32_t imm);
  // An RDMA write gathered from `sges[0..count)` to (remoteAddr, rkey) on queue pair `qp`, with
  // the immediate `imm` when withImm. Fails the connection and returns false when refused.
  bool postGatherWrite(int qp, uint64_t wrId, ibv_sge* sges, int count, uint64_t remoteAddr,
                       uint32_t rkey, bool withImm, uint32_t imm);
  // The receiver's side of the offer rule for message `seq` (tag, bytes) as it is released.
  void walkOwnOffer(uint32_t tag, uint32_t bytes);
  void dropOwnOffer();
  void drainCqEvents();
  void setupQueues();
  void registerBuffer(Buffer* b, int access);
  void postRecv(int qp);
  void flushCredit();
  void connectQps();
  void onCompletion(const ibv_wc& wc);

  ConnectionParams p_;
  Port port_;
  const Verbs* v_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  uint32_t psn_ = 0;
  Buffer send_, recv_;

  QpInfo peer_{};
  bool connected_ = false;  // our queue pairs are ready to send
  bool peerReady_ = false;  // the peer's are ready to receive

  uint64_t posted_ = 0;    // messages written by the executor
  uint64_t wired_ = 0;     // of them, posted to the queue pairs
  uint64_t credited_ = 0;  // of those, released by the receiver
  uint32_t lastCredit_ = 0;
  bool creditPending_ = false;
  std::vector<uint32_t> sendsOutstanding_;  // per queue pair
  uint32_t sendCapacity_ = 0;
  uint64_t received_ = 0;  // messages handed to the executor and released
  std::vector<uint32_t> partsExpected_, partsGot_;
  std::vector<uint64_t> bytesGot_;
  std::vector<uint8_t> landed_;  // per receive slot: its message was written into our landing

  MrCache* cache_ = nullptr;
  // Sent messages by sequence modulo slots, from post until their writes complete.
  struct Sent {
    uint32_t bytes = 0;
    uint32_t tag = 0;
    uint64_t from = 0;  // where the data lies here
    uint32_t lkey = 0;
    const MrCache::Region* region = nullptr;  // held while a reference's writes are posted
    uint32_t writesLeft = 0;
  };
  std::vector<Sent> sent_;
  uint64_t completed_ = 0;  // messages whose writes all completed (their sources are free)
  // The peer's current landing offer, walked from nextSeq (== wired_ once it is caught up).
  struct PeerOffer {
    bool active = false;
    LandingOffer offer;
    uint64_t nextSeq = 0;
    uint64_t at = 0;
  };
  PeerOffer peerOffer_;
  // This side's current offer to the peer.
  struct OwnOffer {
    bool active = false;
    LandingOffer offer;
    uint64_t at = 0;
    const MrCache::Region* region = nullptr;
  };
  OwnOffer ownOffer_;
  uint64_t offersPosted_ = 0;
  uint32_t handedBytes_ = 0, handedTag_ = 0;  // the message recvSlot handed out
};

}  // namespace weft::ib
