// A Weft connection over an external network plugin (loader.h): one send comm and one recv
// comm of the plugin to one peer on one channel, carrying the slot FIFO of connection.h.
//
// Setup, as NCCL does it: each side listen()s, the two handles travel over a control socket of
// the tcp engine (the lower rank opens it to the endpoint its peer published, as for ib), then
// each side connect()s to the other's handle and accept()s on its own listener, calling both
// again until they return comms (the plugin may not block). Neither side waits for the other
// in Transport::connect(): the process's progress thread (and the executor's own calls) move the
// setup on, and messages posted before it finished wait in their slots.
//
// Data: every slot is a registered host buffer of an 8-byte header (bytes, tag) and slotBytes
// of data, sent with one isend; the receiver keeps one irecv posted per free slot, so the
// plugin's own flow control (a null request while the peer has no receive posted) bounds what
// is in flight. Completions are tested in order. The receiver checks each header against the
// size the plugin reports before it hands the slot over.
//
// Failures: a plugin call or completion that fails fails the connection naming the peer; the
// control socket stays open so that a peer that dies (EOF), poisons ('P') or says goodbye ('B')
// is seen at once whatever the plugin does. A closing side first lets its posted messages leave
// (bounded), and its goodbye carries their count: the data travels on the plugin's connections,
// not this socket, so the peer takes the goodbye as the end only once all of them arrived.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/common/doorbell.h"
#include "transports/base/connection.h"
#include "transports/net_plugin/loader.h"
#include "transports/tcp/control_socket.h"
#include "transports/tcp/engine.h"

namespace weft::netplugin {

struct PluginConnectionParams : tcp::ControlParams {
  int device = 0;
  std::chrono::milliseconds timeout{30000};
  Doorbell* bell = nullptr;  // the owning rank's, rung when the progress thread moved something
};

// Where the tcp engine leaves the control socket the peer opened (passive side).
class ControlDrop : public tcp::SocketSink {
 public:
  ~ControlDrop() override;
  void attach(const tcp::Hello& hello, int fd) override;
  int take();  // the socket, or -1 while none has arrived

 private:
  std::mutex mu_;
  int fd_ = -1;
};

class PluginConnection : public transport::Connection {
 public:
  PluginConnection(NetPlugin* net, const PluginConnectionParams& p);
  ~PluginConnection() override;

  // Active side: opens the control socket to the peer's tcp endpoint and sends its handle.
  void start(const bootstrap::SocketAddress& peerAddress, const uint8_t* peerToken);
  // Passive side: the socket the peer opens arrives in `drop`.
  void awaitPeer(std::shared_ptr<ControlDrop> drop);

  size_t slotBytes() const override { return p_.slotBytes; }
  void* sendSlot() override;
  void post(uint32_t bytes, uint32_t tag) override;
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override;
  void release() override;
  Status health(std::string* why) override;
  void poison() override;
  bool poisoned() const override;
  // The peer said goodbye and every message it sent has arrived.
  bool peerEnded() const override {
    return goodbye_.load(std::memory_order_acquire) &&
           arrived_.load(std::memory_order_acquire) >= peerTotal_.load(std::memory_order_acquire);
  }
  const char* transportName() const override { return "net-plugin"; }

  // For the progress thread: one turn; true if anything moved.
  bool backgroundPass();
  // Whether the connection waits on the plugin (setup, sends in flight): the thread then
  // comes back soon rather than sleeping on the control sockets.
  bool busy();
  int controlFd();

 private:
  size_t stride() const { return kSlotHeaderBytes + p_.slotBytes; }
  char* sendBuffer(uint64_t i) { return sendBuf_.data() + (i % p_.slots) * stride(); }
  char* recvBuffer(uint64_t i) { return recvBuf_.data() + (i % p_.slots) * stride(); }
  // Moves setup and data on (mu_ held); false once failed.
  bool progress();
  bool progressSetup();
  void progressSends();
  void progressReceives();
  void readControl();
  void sendHandle();
  void fail(const std::string& why);
  std::string peerName() const;

  static constexpr size_t kSlotHeaderBytes = 8;

  NetPlugin* net_;
  PluginConnectionParams p_;
  std::vector<char> sendBuf_, recvBuf_;

  mutable std::mutex mu_;
  std::shared_ptr<ControlDrop> drop_;
  int fd_ = -1;
  bool handleSent_ = false;
  bool controlClosed_ = false;  // the peer's end of the control socket closed
  uint8_t myHandle_[NCCL_NET_HANDLE_MAXSIZE + 8] = {};
  uint8_t peerHandle_[NCCL_NET_HANDLE_MAXSIZE + 8] = {};
  size_t peerHandleGot_ = 0;
  void* listenComm_ = nullptr;
  void* sendComm_ = nullptr;
  void* recvComm_ = nullptr;
  void* sendMr_ = nullptr;
  void* recvMr_ = nullptr;
  bool ready_ = false;
  std::chrono::steady_clock::time_point setupDeadline_;
  std::string error_;
  uint64_t events_ = 0;  // bumped by everything that may let the executor move on

  uint64_t posted_ = 0;  // slots the executor filled
  uint64_t wired_ = 0;   // of them, handed to isend
  uint64_t sent_ = 0;    // of those, completed
  std::vector<void*> sendReqs_;
  uint64_t recvHead_ = 0;    // the executor's next slot
  uint64_t recvPosted_ = 0;  // irecvs posted (slots up to recvHead_ + slots)
  std::vector<void*> recvReqs_;
  std::vector<int> recvSizes_;  // per slot: bytes that arrived, -1 while none
  std::atomic<bool> poisoned_{false};
  std::atomic<bool> goodbye_{false};
  std::atomic<uint64_t> peerTotal_{0};  // messages the peer sent in all, from its goodbye
  std::atomic<uint64_t> arrived_{0};    // messages that arrived here
  std::string control_;                 // control bytes read but not parsed yet
  std::atomic<bool> failed_{false};
};

}  // namespace weft::netplugin
