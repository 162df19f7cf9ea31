// One comm of libnccl-net-weft.so: ncclNet's message semantics (isend/irecv of any size, test,
// tags, receives larger than sends) over one of Weft's slot connections (tcp or ib), one
// direction per comm as ncclNet has it.
//
// On the slots a message is a header slot (magic, the ncclNet tag, the size) followed by its
// bytes in slot-sized pieces. A sender whose connection sends by reference (tcp) posts the
// pieces straight from the caller's buffer; otherwise it copies them into slots. The receiver
// checks every header and piece against what it posted before it copies a byte: a wrong
// magic, a tag other than the receive's, a message larger than the receive, or a piece past
// the message's end fails the comm.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "transports/base/connection.h"
#include "transports/net_plugin/nccl_net.h"

namespace weft::netplugin {

class NetComm;

struct NetRequest {
  NetComm* comm = nullptr;
  bool inUse = false;
  bool send = false;
  char* data = nullptr;
  size_t capacity = 0;  // receive: bytes posted; send: the message's size
  int tag = 0;
  // Progress.
  bool headerDone = false;
  size_t size = 0;  // receive: the incoming message's size, once its header arrived
  size_t moved = 0;
  uint64_t lastPost = 0;  // send by reference: the connection's count after its last piece
  bool complete = false;
};

class NetComm {
 public:
  static constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;

  // `keepAlive` holds what must outlive the connection (the listener's endpoint).
  NetComm(std::unique_ptr<transport::Connection> conn, bool sender, std::string peer,
          std::shared_ptr<void> keepAlive = nullptr);
  ~NetComm();
  NetComm(const NetComm&) = delete;
  NetComm& operator=(const NetComm&) = delete;

  bool sender() const { return sender_; }
  // *request null: every request slot is taken (the caller tries again later).
  ncclNetResult_t isend(void* data, size_t size, int tag, void** request);
  ncclNetResult_t irecv(void* data, size_t size, int tag, void** request);
  ncclNetResult_t test(NetRequest* r, int* done, int* size);

 private:
  NetRequest* allocate();
  // Moves queued requests on (mu_ held); false once the comm failed.
  bool progress();
  bool progressSends();
  bool progressReceives();
  void fail(const std::string& why);

  std::unique_ptr<transport::Connection> conn_;
  transport::ReferenceSends* refs_ = nullptr;
  bool sender_;
  std::string peer_;
  std::shared_ptr<void> keepAlive_;
  std::mutex mu_;
  NetRequest requests_[kMaxRequests];
  std::deque<NetRequest*> queue_;  // in posting order; sends: those not fully posted yet
  std::string error_;
  std::chrono::steady_clock::time_point lastHealth_{};
};

}  // namespace weft::netplugin
