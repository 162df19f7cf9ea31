// One rank's Bootstrap after the rendezvous. Each rank keeps a listen socket and opens one
// outgoing connection per peer on demand (data flows only from opener to acceptor, so the opener
// also learns of the peer's death when that connection reads EOF). A progress thread accepts and
// authenticates incoming connections (secret first), reads their frames into per-peer inboxes
// keyed by (channel, tag), and decides when a peer is gone. Allgather is a ring over the
// connections to next/prev; send/recv use the same connections and inboxes.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/drop_log.h"
#include "src/bootstrap/secret.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace weft::bootstrap {

class TcpBootstrap final : public Bootstrap {
 public:
  // `listen`: this rank's bound listening socket; `addresses`: every rank's listen address as
  // distributed by the root. Starts the progress thread.
  // `callTimeout` bounds each exchange after the rendezvous.
  TcpBootstrap(int rank, int nranks, const Secret& secret, Socket listen,
               std::vector<SocketAddress> addresses, std::chrono::milliseconds callTimeout);
  ~TcpBootstrap() override;

  // Forms the ring and checks that all ranks hold the same address table, within `deadline`
  // (`limit` is its length, for messages). Throws like allgather.
  void connectRing(const Deadline& deadline, std::chrono::milliseconds limit);

  int rank() const override { return rank_; }
  int size() const override { return nranks_; }
  uint64_t commHash() const override { return commHash_; }
  void allgather(void* data, size_t bytesPerRank) override;
  void barrier() override;
  void send(int peer, int tag, const void* data, size_t bytes) override;
  void recv(int peer, int tag, void* data, size_t bytes) override;
  void abort() override;

  const SocketAddress& listenAddress() const { return addresses_[rank_]; }
  // Incoming connections dropped for failing to authenticate (strangers), for tests.
  uint64_t droppedConnections() const { return dropped_.load(); }

 private:
  struct Message {
    std::unique_ptr<char[]> data;
    size_t size = 0;
  };
  struct Budget {
    Deadline deadline;
    std::chrono::milliseconds limit;
  };
  // Per-peer state. Fields above the line are guarded by mu_.
  struct Peer {
    std::unordered_map<uint64_t, std::deque<Message>> inbox;  // by key(channel, tag)
    bool incoming = false;          // an authenticated connection from the peer is registered
    bool incomingClosed = false;    // ...and it ended: everything the peer sent is in the inbox
    bool outgoingClosed = false;    // our connection to the peer failed or read EOF
    uint64_t outgoingClosedAt = 0;  // iteration_ when outgoingClosed was set
    bool dead = false;              // recv gives up once the inbox has no match
    std::string reason;             // why the peer is considered gone
    int outFd = -1;                 // our connection's descriptor, watched for EOF
    // ------
    std::mutex connectMu;  // serializes opening `out`
    std::mutex writeMu;    // one frame at a time on `out`
    Socket out;            // set once under connectMu; closed by the destructor
  };
  // Progress-thread-only state.
  struct Pending {
    Socket sock;
    SocketAddress peer;
    Clock::time_point deadline;
    uint8_t hello[wire::kPeerHelloBytes] = {};
    size_t got = 0;
  };
  struct Incoming {
    Socket sock;
    int from = -1;
    uint8_t header[wire::kFrameHeaderBytes] = {};
    size_t headerGot = 0;
    bool inBody = false;
    uint64_t key = 0;
    Message body;
    size_t bodyGot = 0;
    bool closed = false;
  };

  static uint64_t key(uint32_t channel, int tag);
  Budget budget() const { return Budget{Deadline(timeout_), timeout_}; }
  std::string who(int peer) const;
  [[noreturn]] void throwAborted() const;
  void checkArgs(int peer, const void* data, size_t bytes, const char* op) const;

  void allgatherWithin(void* data, size_t bytesPerRank, const Budget& budget);
  void sendFrame(int peer, uint32_t channel, int tag, const void* data, size_t bytes,
                 const Budget& budget);
  Message recvFrame(int peer, uint32_t channel, int tag, const Budget& budget);
  // Opens (once) the connection to `peer`. Returns false when the peer is gone and `forRecv`
  // (the caller then waits for the progress thread's verdict); throws otherwise.
  bool connectTo(int peer, const Budget& budget, bool forRecv);
  void markOutgoingClosed(int peer, const std::string& reason);

  void progressLoop();
  void acceptAll();
  bool advancePending(Pending& p);  // true when finished (registered or dropped)
  bool dropPending(Pending& p, const std::string& why);
  void readIncoming(Incoming& in);
  void deliver(Incoming& in);
  void closeIncoming(Incoming& in, const std::string& why);
  void checkOutgoing(int peer, int fd, uint64_t iteration);
  bool updateLiveness(uint64_t iteration);  // true when another pass is needed soon

  const int rank_;
  const int nranks_;
  const Secret secret_;
  const uint64_t commHash_;
  const std::string name_;  // "bootstrap rank r/n", prefix of messages
  const std::chrono::milliseconds timeout_;
  Socket listen_;  // used only by the progress thread, which closes it on exit
  const std::vector<SocketAddress> addresses_;
  EventFd abortFd_;  // latch: signalled by abort() and the destructor, never drained
  EventFd wakeFd_;   // wakes the progress thread to watch a new connection
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> dropped_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Peer>> peers_;
  uint64_t iteration_ = 0;  // progress passes (guarded by mu_)

  std::vector<Pending> pending_;
  DropLog drops_;  // progress thread only
  std::vector<Incoming> incoming_;
  std::thread progress_;
};

}  // namespace weft::bootstrap
