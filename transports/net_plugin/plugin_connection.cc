#include "transports/net_plugin/plugin_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "src/common/error.h"
#include "src/common/log.h"
#include "transports/net_plugin/plugin_progress.h"

namespace weft::netplugin {
namespace {

constexpr uint32_t kHandleMagic = 0x48504e57;  // "WNPH": a listen handle on the control socket
constexpr size_t kHandleMessageBytes = 8 + NCCL_NET_HANDLE_MAXSIZE;
// The longest a closing connection waits for its messages to leave.
constexpr std::chrono::milliseconds kDrainLimit{10000};

}  // namespace

PluginConnection::PluginConnection(NetPlugin* net, const PluginConnectionParams& p)
    : remote::ControlConnection(p,
                                {"net plugin", "net plugin " + net->name(), kHandleMessageBytes,
                                 "the listen handle", sizeof(uint64_t)},
                                ProgressThread::get()),
      net_(net),
      p_(p) {
  if (p_.slots == 0 || p_.slotBytes == 0 || p_.slotBytes > (size_t{1} << 30))
    weft::fail(Status::kInvalidArgument, "net plugin: unusable FIFO of " +
                                             std::to_string(p_.slots) + " x " +
                                             std::to_string(p_.slotBytes) + " B");
  sendBuf_.resize(p_.slots * stride());
  recvBuf_.resize(p_.slots * stride());
  sendReqs_.assign(p_.slots, nullptr);
  recvReqs_.assign(p_.slots, nullptr);
  recvSizes_.assign(p_.slots, -1);
  ncclNetResult_t r = net_->listen(p_.device, myHandle_ + 8, &listenComm_);
  if (r != kNcclNetSuccess || !listenComm_)
    weft::fail(Status::kSystemError, "net plugin " + net_->name() + ": listen() on device " +
                                         std::to_string(p_.device) + " failed (" + resultName(r) +
                                         ")");
  const uint32_t header[2] = {kHandleMagic, NCCL_NET_HANDLE_MAXSIZE};
  std::memcpy(myHandle_, header, sizeof(header));
  joinProgressThread();
}

PluginConnection::~PluginConnection() {
  leaveProgressThread();
  std::lock_guard<std::mutex> lock(mu_);
  // What the executor posted leaves first (bounded): the peer may still wait for it. Then the
  // goodbye, which carries the count of messages, so that the peer takes it as the end only
  // once all of them arrived (they travel on the plugin's own connections, not this socket).
  const auto deadline = std::chrono::steady_clock::now() + std::min(p_.timeout, kDrainLimit);
  while (ready_ && sent_ < posted_ && !failed_.load() && !poisoned_.load() &&
         std::chrono::steady_clock::now() < deadline) {
    progress();
    if (sent_ < posted_) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  closeControl(sent_, std::chrono::milliseconds(1000));
  if (sendMr_) net_->deregMr(sendComm_, sendMr_);
  if (recvMr_) net_->deregMr(recvComm_, recvMr_);
  if (sendComm_) net_->closeSend(sendComm_);
  if (recvComm_) net_->closeRecv(recvComm_);
  if (listenComm_) net_->closeListen(listenComm_);
}

std::vector<uint8_t> PluginConnection::ownSetup() {
  return std::vector<uint8_t>(myHandle_, myHandle_ + kHandleMessageBytes);
}

bool PluginConnection::onPeerSetup(const uint8_t* message) {
  std::memcpy(peerHandle_, message, kHandleMessageBytes);
  uint32_t header[2];
  std::memcpy(header, peerHandle_, sizeof(header));
  if (header[0] != kHandleMagic || header[1] != NCCL_NET_HANDLE_MAXSIZE) {
    fail("sent a malformed handle message");
    return false;
  }
  return true;
}

bool PluginConnection::progressSetup() {
  takeControlSocket();
  readControl();
  if (failed_.load()) return false;
  if (peerSetupIn()) {
    ncclNetResult_t r = kNcclNetSuccess;
    if (!sendComm_) r = net_->connect(p_.device, peerHandle_ + 8, &sendComm_);
    if (r == kNcclNetSuccess && !recvComm_) r = net_->accept(listenComm_, &recvComm_);
    if (r != kNcclNetSuccess)
      return fail(std::string("connect/accept failed (") + resultName(r) + ")"), false;
  }
  if (!sendComm_ || !recvComm_) return !failIfSetupLate();
  ncclNetResult_t r = net_->regMr(sendComm_, sendBuf_.data(), sendBuf_.size(), &sendMr_);
  if (r == kNcclNetSuccess) r = net_->regMr(recvComm_, recvBuf_.data(), recvBuf_.size(), &recvMr_);
  if (r != kNcclNetSuccess)
    return fail(std::string("regMr of host memory failed (") + resultName(r) + ")"), false;
  net_->closeListen(listenComm_);
  listenComm_ = nullptr;
  ready_ = true;
  ++events_;
  WEFT_INFO(NET, "net plugin %s: rank %d connected to rank %d channel %d", net_->name().c_str(),
            p_.rank, p_.peer, p_.channel);
  return true;
}

void PluginConnection::progressSends() {
  while (wired_ < posted_) {
    char* slot = sendBuffer(wired_);
    uint32_t header[2];
    std::memcpy(header, slot, sizeof(header));
    void* req = nullptr;
    ncclNetResult_t r =
        net_->isend(sendComm_, slot, kSlotHeaderBytes + header[0], 0, sendMr_, &req);
    if (r != kNcclNetSuccess) return fail(std::string("isend failed (") + resultName(r) + ")");
    if (!req) break;  // the peer has no receive posted yet
    sendReqs_[wired_ % p_.slots] = req;
    ++wired_;
    ++events_;
  }
  while (sent_ < wired_) {
    int done = 0, size = 0;
    ncclNetResult_t r = net_->test(sendReqs_[sent_ % p_.slots], &done, &size);
    if (r != kNcclNetSuccess) return fail(std::string("a send failed (") + resultName(r) + ")");
    if (!done) break;
    sendReqs_[sent_ % p_.slots] = nullptr;
    ++sent_;
    ++events_;
  }
}

void PluginConnection::progressReceives() {
  while (recvPosted_ < recvHead_ + p_.slots) {
    void* req = nullptr;
    ncclNetResult_t r = net_->irecv(recvComm_, recvBuffer(recvPosted_), stride(), 0, recvMr_, &req);
    if (r != kNcclNetSuccess) return fail(std::string("irecv failed (") + resultName(r) + ")");
    if (!req) break;
    recvReqs_[recvPosted_ % p_.slots] = req;
    recvSizes_[recvPosted_ % p_.slots] = -1;
    ++recvPosted_;
  }
  // Completions in order: the oldest receive that has not completed yet.
  for (uint64_t i = recvHead_; i < recvPosted_; ++i) {
    const size_t idx = i % p_.slots;
    if (recvSizes_[idx] >= 0) continue;
    int done = 0, size = 0;
    ncclNetResult_t r = net_->test(recvReqs_[idx], &done, &size);
    if (r != kNcclNetSuccess) return fail(std::string("a receive failed (") + resultName(r) + ")");
    if (!done) break;
    uint32_t header[2];
    if (size < static_cast<int>(kSlotHeaderBytes) || static_cast<size_t>(size) > stride())
      return fail("delivered " + std::to_string(size) + " B, not a slot message");
    std::memcpy(header, recvBuffer(i), sizeof(header));
    if (header[0] != static_cast<uint32_t>(size) - kSlotHeaderBytes)
      return fail("sent a slot whose header says " + std::to_string(header[0]) + " B where " +
                  std::to_string(size - kSlotHeaderBytes) + " B arrived");
    recvReqs_[idx] = nullptr;
    recvSizes_[idx] = size;
    arrived_.fetch_add(1, std::memory_order_release);
    ++events_;
  }
}

bool PluginConnection::progress() {
  if (failed_.load()) return false;
  if (!ready_) {
    if (!progressSetup() || !ready_) return !failed_.load();
  } else {
    readControl();
  }
  if (failed_.load()) return false;
  progressSends();
  if (!failed_.load()) progressReceives();
  return !failed_.load();
}

void* PluginConnection::sendSlot() {
  std::lock_guard<std::mutex> lock(mu_);
  if (posted_ - sent_ >= p_.slots) progress();
  if (posted_ - sent_ >= p_.slots) return nullptr;
  return sendBuffer(posted_) + kSlotHeaderBytes;
}

void PluginConnection::post(uint32_t bytes, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t header[2] = {bytes, tag};
  std::memcpy(sendBuffer(posted_), header, sizeof(header));
  ++posted_;
  if (ready_) progress();
}

const void* PluginConnection::recvSlot(uint32_t* bytes, uint32_t* tag) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t idx = recvHead_ % p_.slots;
  if (!ready_ || recvSizes_[idx] < 0 || recvHead_ >= recvPosted_) progress();
  if (!ready_ || recvHead_ >= recvPosted_ || recvSizes_[idx] < 0) return nullptr;
  uint32_t header[2];
  std::memcpy(header, recvBuffer(recvHead_), sizeof(header));
  *bytes = header[0];
  *tag = header[1];
  return recvBuffer(recvHead_) + kSlotHeaderBytes;
}

void PluginConnection::release() {
  std::lock_guard<std::mutex> lock(mu_);
  recvSizes_[recvHead_ % p_.slots] = -1;
  ++recvHead_;
  progress();  // posts the receive for the freed slot
}

bool PluginConnection::busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_.load() && (!ready_ || sent_ < posted_);
}

}  // namespace weft::netplugin
