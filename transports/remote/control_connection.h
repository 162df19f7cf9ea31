// What a connection of a transport that sets up over a tcp control socket (ib, a network plugin)
// has whatever carries its data: the control socket, its setup message, its control bytes, its
// failure and poisoning, and its place on the transport's progress thread.
//
// Setup: the lower rank opens the control socket to the endpoint its peer published for tcp
// (start(); the hello names the communicator, the ranks and the channel); the higher rank's
// endpoint hands the socket over (awaitPeer()). Each side then sends its setup message, of a
// size the transport fixes, and reads the peer's; the transport acts on it (onPeerSetup).
//
// Afterwards the socket carries single control bytes: kPoisoned, kGoodbye (followed by a count
// of messages where the transport's data travels elsewhere and the peer must know when all of
// it arrived) and the transport's own (onControlByte). The socket stays open for the life of the
// connection, so that a peer that dies (the socket closes) is seen at once whatever carries the
// data; anything else on it fails the connection.
//
// Locking: mu_ guards the connection's state; the transport's entry points and the progress
// thread's turns take it. The transport's constructor joins the progress thread last and its
// destructor leaves it first (joinProgressThread, leaveProgressThread), so the thread never
// turns a half-made or half-destroyed connection.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/common/doorbell.h"
#include "transports/base/connection.h"
#include "transports/base/transport.h"
#include "transports/remote/control_bytes.h"
#include "transports/remote/progress_thread.h"
#include "transports/tcp/control_socket.h"
#include "transports/tcp/engine.h"

namespace weft::remote {

// What ib::ConnectionParams and netplugin::PluginConnectionParams start with.
struct ConnectionParams : tcp::ControlParams {
  std::chrono::milliseconds timeout{30000};  // the setup's and the control writes' bound
  Doorbell* bell = nullptr;  // the owning rank's, rung when the progress thread moved something
};

// The parameters of connect(ctx, peer, channel) (the setup bounded by ctx's timeout, else 30 s).
ConnectionParams connectionParamsFor(const transport::ConnectContext& ctx, int peer, int channel);

// How a transport uses its control socket.
struct ControlProtocol {
  const char* transport = "";    // leads its errors: "ib", "net plugin"
  std::string link;              // the peer's link in its name: "ib mlx5_0:1", "net plugin X"
  size_t setupBytes = 0;         // the setup message each side sends first
  const char* setupWhat = "";    // what that message is, for errors: "the listen handle"
  size_t goodbyeCountBytes = 0;  // after kGoodbye: 0, or 8 (the count of messages sent)
};

class ControlDrop;

class ControlConnection : public transport::Connection, public ProgressClient {
 public:
  ~ControlConnection() override;

  // Active side: opens the control socket to the peer's tcp endpoint and sends the setup message.
  void start(const bootstrap::SocketAddress& peerAddress, const uint8_t* peerToken);
  // Passive side: where the tcp engine is to leave the socket the peer opens (Endpoint::claim).
  std::shared_ptr<tcp::SocketSink> awaitPeer();
  // Either side per the rule above, for connect(ctx, peer, channel).
  void join(const transport::ConnectContext& ctx, int peer, int channel);

  size_t slotBytes() const override { return params_.slotBytes; }
  Status health(std::string* why) override;
  void poison() override;
  bool poisoned() const override;
  bool peerEnded() const override { return goodbye_.load(std::memory_order_acquire); }

  // ProgressClient.
  bool backgroundPass() override;
  bool busy() override { return false; }
  void watchedFds(std::vector<int>* fds) override;

  // Tests only: sends raw bytes on the control socket, as a broken or hostile peer would.
  void sendControlBytesForTesting(const std::string& bytes);

 protected:
  ControlConnection(const ConnectionParams& params, ControlProtocol protocol,
                    ProgressThread& thread);

  void joinProgressThread() { thread_.add(this); }
  void leaveProgressThread() { thread_.remove(this); }

  // The transport's part, called with mu_ held.
  // Moves setup and data on; false once failed.
  virtual bool progress() = 0;
  // The progress thread's turn (by default progress()).
  virtual void backgroundTurn() { progress(); }
  // This side's setup message (setupBytes).
  virtual std::vector<uint8_t> ownSetup() = 0;
  // The peer's setup message has arrived; false (having failed) where it is unusable.
  virtual bool onPeerSetup(const uint8_t* message) = 0;
  // A control byte other than kPoisoned and kGoodbye; false where it means nothing.
  virtual bool onControlByte(char) { return false; }
  // Descriptors of the transport's own for the progress thread to watch.
  virtual void transportFds(std::vector<int>*) {}

  // With mu_ held. Takes the socket the peer opened once it arrived (and sends the setup
  // message on it); whether a socket is there.
  bool takeControlSocket();
  // Reads what arrived: the peer's setup message, then control bytes.
  void readControl();
  bool peerSetupIn() const { return peerSetupGot_ == protocol_.setupBytes; }
  // Writes kGoodbye (with `count` where the protocol carries one) within `timeout` and closes
  // the socket.
  void closeControl(uint64_t count, std::chrono::milliseconds timeout);
  // Writes one control byte within a second; false where the socket refused it.
  bool sendControlByte(char what);
  // Fails the connection with the setup's timeout once its deadline passed; whether it did.
  bool failIfSetupLate();
  // Fails the connection (once) with `why`, naming the peer.
  void fail(const std::string& why);
  std::string peerName() const;
  uint64_t peerTotal() const { return peerTotal_.load(std::memory_order_acquire); }
  const ConnectionParams& controlParams() const { return params_; }

  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> poisoned_{false};
  uint64_t events_ = 0;  // bumped by everything that may let the executor move on

 private:
  void sendSetup();
  // Parses the control bytes read; false once failed.
  bool parseControl();

  const ConnectionParams params_;
  const ControlProtocol protocol_;
  ProgressThread& thread_;
  std::shared_ptr<ControlDrop> drop_;
  int fd_ = -1;
  bool controlClosed_ = false;  // the peer's end closed: nothing more to read
  bool setupSent_ = false;
  std::vector<uint8_t> peerSetup_;
  size_t peerSetupGot_ = 0;
  std::string control_;  // control bytes read but not parsed yet
  std::string error_;
  std::chrono::steady_clock::time_point setupDeadline_;
  std::atomic<bool> goodbye_{false};
  std::atomic<uint64_t> peerTotal_{0};  // from the peer's goodbye, where it carries a count
};

}  // namespace weft::remote
