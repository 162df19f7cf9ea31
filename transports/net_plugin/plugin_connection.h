// A Weft connection over an external network plugin (loader.h): one send comm and one recv
// comm of the plugin to one peer on one channel, carrying the slot FIFO of connection.h.
//
// Setup, as NCCL does it: each side listen()s, the two handles travel as the setup messages of
// the control socket (transports/remote/control_connection.h, as for ib), then
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
// control socket stays open so that a peer that dies (EOF), poisons or says goodbye is seen at
// once whatever the plugin does. A closing side first lets its posted messages leave (bounded),
// and its goodbye carries their count: the data travels on the plugin's connections, not this
// socket, so the peer takes the goodbye as the end only once all of them arrived.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/net_plugin/loader.h"
#include "transports/remote/control_connection.h"

namespace weft::netplugin {

struct PluginConnectionParams : remote::ConnectionParams {
  int device = 0;
};

class PluginConnection : public remote::ControlConnection {
 public:
  PluginConnection(NetPlugin* net, const PluginConnectionParams& p);
  ~PluginConnection() override;

  void* sendSlot() override;
  void post(uint32_t bytes, uint32_t tag) override;
  const void* recvSlot(uint32_t* bytes, uint32_t* tag) override;
  void release() override;
  // The peer said goodbye and every message it sent has arrived.
  bool peerEnded() const override {
    return ControlConnection::peerEnded() &&
           arrived_.load(std::memory_order_acquire) >= peerTotal();
  }
  const char* transportName() const override { return "net-plugin"; }

  // Whether the connection waits on the plugin (setup, sends in flight): the progress thread
  // then comes back soon rather than sleeping on the control sockets.
  bool busy() override;

 private:
  // ControlConnection: the setup message is the listen handle; no control bytes of its own.
  bool progress() override;
  std::vector<uint8_t> ownSetup() override;
  bool onPeerSetup(const uint8_t* message) override;

  size_t stride() const { return kSlotHeaderBytes + p_.slotBytes; }
  char* sendBuffer(uint64_t i) { return sendBuf_.data() + (i % p_.slots) * stride(); }
  char* recvBuffer(uint64_t i) { return recvBuf_.data() + (i % p_.slots) * stride(); }
  bool progressSetup();
  void progressSends();
  void progressReceives();

  static constexpr size_t kSlotHeaderBytes = 8;

  NetPlugin* net_;
  PluginConnectionParams p_;
  std::vector<char> sendBuf_, recvBuf_;

  uint8_t myHandle_[NCCL_NET_HANDLE_MAXSIZE + 8] = {};
  uint8_t peerHandle_[NCCL_NET_HANDLE_MAXSIZE + 8] = {};
  void* listenComm_ = nullptr;
  void* sendComm_ = nullptr;
  void* recvComm_ = nullptr;
  void* sendMr_ = nullptr;
  void* recvMr_ = nullptr;
  bool ready_ = false;

  uint64_t posted_ = 0;  // slots the executor filled
  uint64_t wired_ = 0;   // of them, handed to isend
  uint64_t sent_ = 0;    // of those, completed
  std::vector<void*> sendReqs_;
  uint64_t recvHead_ = 0;    // the executor's next slot
  uint64_t recvPosted_ = 0;  // irecvs posted (slots up to recvHead_ + slots)
  std::vector<void*> recvReqs_;
  std::vector<int> recvSizes_;        // per slot: bytes that arrived, -1 while none
  std::atomic<uint64_t> arrived_{0};  // messages that arrived here
};

}  // namespace weft::netplugin
