#include "transports/ib/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "src/common/log.h"
#include "transports/ib/registration.h"

namespace weft::ib {
namespace {

// Local ACK timeout exponent (4.096 us * 2^kAckTimeout; NCCL_IB_TIMEOUT's default): long, since a
// dead peer is seen on the control socket at once, so a long timeout costs nothing, while a short
// one retransmits spuriously on slow links (emulated ones above all;
// perf/results/2026-11-27-rdma-emulation.md holds what the guests' link does).
constexpr uint8_t kAckTimeout = 20;

std::atomic<void (*)(int, QpInfo*)> setupForger{nullptr};

uint64_t wrId(int qp, bool recv) { return static_cast<uint64_t>(qp) << 1 | (recv ? 1 : 0); }

}  // namespace

void setSetupForgerForTesting(void (*forge)(int, QpInfo*)) { setupForger.store(forge); }

IbConnection::IbConnection(const ConnectionParams& p, const Port& port)
    : remote::ControlConnection(p,
                                {"ib", "ib " + port.device + ":" + std::to_string(port.port),
                                 sizeof(QpInfo), "the queue pair numbers", 0},
                                ProgressThread::get()),
      p_(p),
      port_(port),
      v_(verbs()) {
  if (!v_) weft::fail(Status::kSystemError, "ib: libibverbs is not loaded");
  if (p_.slots == 0 || p_.slots > kMaxSlots || p_.slotBytes == 0 || p_.slotBytes > kMaxSlotBytes)
    weft::fail(Status::kInvalidArgument, "ib: unusable FIFO of " + std::to_string(p_.slots) +
                                             " x " + std::to_string(p_.slotBytes) + " B");
  p_.qps = std::clamp(p_.qps, 1, static_cast<int>(kMaxQps));
  partsExpected_.assign(p_.slots, 0);
  partsGot_.assign(p_.slots, 0);
  bytesGot_.assign(p_.slots, 0);
  landed_.assign(p_.slots, 0);
  sent_.assign(p_.slots, Sent{});
  cache_ = &mrCacheOf(port_.pd);
  if (p_.mrRetainedBytes >= 0) cache_->setRetainedBytes(static_cast<size_t>(p_.mrRetainedBytes));
  registerBuffer(&send_, IBV_ACCESS_LOCAL_WRITE);
  registerBuffer(&recv_, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  setupQueues();
  joinProgressThread();
}

IbConnection::~IbConnection() {
  leaveProgressThread();
  closeControl(0, std::chrono::milliseconds(0));  // a goodbye if the socket takes it at once
  for (ibv_qp* qp : qps_) v_->destroyQp(qp);
  // No write is in flight any more: the user memory held for them is free.
  for (uint64_t seq = completed_; seq < posted_; ++seq)
    cache_->release(sent_[seq % p_.slots].region);
  if (ownOffer_.active) cache_->release(ownOffer_.region);
  if (cq_) v_->destroyCq(cq_);
  if (channel_) v_->destroyCompChannel(channel_);
  for (Buffer* b : {&send_, &recv_}) {
    if (b->mr) v_->deregMr(b->mr);
    std::free(b->base);
  }
}

void IbConnection::registerBuffer(Buffer* b, int access) {
  // The FIFO and the offer mailbox (receive side) or the offers' staging (send side).
  b->bytes = (recvRegionBytes(p_.slots, p_.slotBytes) + 4095) & ~size_t{4095};
  b->base = std::aligned_alloc(4096, b->bytes);
  if (!b->base) weft::fail(Status::kSystemError, "ib: out of memory for the FIFO");
  std::memset(b->base, 0, b->bytes);
  b->mr = v_->regMr(port_.pd, b->base, b->bytes, access);
  if (!b->mr)
    weft::fail(Status::kSystemError, "ib: ibv_reg_mr of " + std::to_string(b->bytes) + " B on " +
                                         port_.device + " failed: " + std::strerror(errno) +
                                         " (locked-memory limit? ulimit -l)");
}

void IbConnection::setupQueues() {
  // Per queue pair at most `slots` data writes are in flight (the credit window) and credits
  // are cumulative (one pending at a time is enough), so twice the slots bound both queues.
  sendCapacity_ = 2 * p_.slots + 8;
  const int cqEntries = static_cast<int>(2 * sendCapacity_ * static_cast<uint32_t>(p_.qps));
  // Completions wake the progress thread through the channel (read without blocking).
  channel_ = v_->createCompChannel(port_.context);
  if (!channel_)
    weft::fail(Status::kSystemError,
               "ib: ibv_create_comp_channel failed: " + std::string(std::strerror(errno)));
  ::fcntl(channel_->fd, F_SETFL, ::fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  cq_ = v_->createCq(port_.context, cqEntries, nullptr, channel_, 0);
  if (!cq_)
    weft::fail(Status::kSystemError,
               "ib: ibv_create_cq failed: " + std::string(std::strerror(errno)));
  if (ibv_req_notify_cq(cq_, 0)) weft::fail(Status::kSystemError, "ib: ibv_req_notify_cq failed");
  psn_ = static_cast<uint32_t>(std::rand()) & 0xffffff;
  for (int i = 0; i < p_.qps; ++i) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 1;
    init.cap.max_send_wr = sendCapacity_;
    init.cap.max_recv_wr = sendCapacity_;
    init.cap.max_send_sge = 2;  // a reference: its header here, its data in the user's buffer
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = v_->createQp(port_.pd, &init);
    if (!qp)
      weft::fail(Status::kSystemError,
                 "ib: ibv_create_qp failed: " + std::string(std::strerror(errno)));
    qps_.push_back(qp);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(port_.port);
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (v_->modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      weft::fail(Status::kSystemError,
                 "ib: queue pair to INIT failed: " + std::string(std::strerror(errno)));
  }
  sendsOutstanding_.assign(qps_.size(), 0);
  // Receives may be posted in INIT: they are there before the peer can send.
  for (int i = 0; i < p_.qps; ++i)
    for (uint32_t k = 0; k < sendCapacity_; ++k) postRecv(i);
}

void IbConnection::postRecv(int qp) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wrId(qp, true);
  wr.num_sge = 0;  // data lands through RDMA writes; the receive only takes the immediate
  if (ibv_post_recv(qps_[qp], &wr, &bad)) fail("ibv_post_recv failed");
}

static QpInfo makeInfo(const ConnectionParams& p, const Port& port, const std::vector<ibv_qp*>& qps,
                       uint32_t psn, const ibv_mr* recvMr) {
  QpInfo info{};
  info.magic = kInfoMagic;
  info.qps = static_cast<uint32_t>(qps.size());
  for (size_t i = 0; i < qps.size(); ++i) info.qpn[i] = qps[i]->qp_num;
  info.psn = psn;
  info.slots = p.slots;
  info.slotBytes = p.slotBytes;
  info.recvAddr = reinterpret_cast<uint64_t>(recvMr->addr);
  info.recvKey = recvMr->rkey;
  info.lid = port.lid;
  info.ethernet = port.ethernet ? 1 : 0;
  info.mtu = static_cast<uint8_t>(port.mtu);
  std::memcpy(info.gid, port.gid.raw, 16);
  return info;
}

std::vector<uint8_t> IbConnection::ownSetup() {
  QpInfo info = makeInfo(p_, port_, qps_, psn_, recv_.mr);
  if (auto forge = setupForger.load()) forge(p_.rank, &info);
  std::vector<uint8_t> message(sizeof(info));
  std::memcpy(message.data(), &info, sizeof(info));
  return message;
}

bool IbConnection::onPeerSetup(const uint8_t* message) {
  std::memcpy(&peer_, message, sizeof(peer_));
  const std::string bad = checkPeerInfo(
      peer_, {static_cast<uint32_t>(qps_.size()), p_.slots, p_.slotBytes, port_.ethernet});
  if (!bad.empty()) {
    fail(bad);
    return false;
  }
  connectQps();
  return !failed_.load();
}

bool IbConnection::onControlByte(char c) {
  if (controlByte(c) != kReady) return false;
  peerReady_ = true;
  return true;
}

void IbConnection::connectQps() {
  const ibv_mtu mtu = static_cast<ibv_mtu>(std::min<int>(peer_.mtu, port_.mtu));
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = peer_.qpn[i];
    a.rq_psn = peer_.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(port_.port);
    if (port_.ethernet) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, peer_.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
    } else {
      a.ah_attr.dlid = peer_.lid;
    }
    if (v_->modifyQp(qps_[i], &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
      fail("queue pair to RTR failed: " + std::string(std::strerror(errno)));
      return;
    }
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RTS;
    r.timeout = kAckTimeout;
    r.retry_cnt = 7;
    r.rnr_retry = 7;  // the receiver reposts receives as it polls: wait for it
    r.sq_psn = psn_;
    r.max_rd_atomic = 1;
    if (v_->modifyQp(qps_[i], &r,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
      fail("queue pair to RTS failed: " + std::string(std::strerror(errno)));
      return;
    }
  }
  connected_ = true;
  ++events_;
  if (!sendControlByte(kReady)) fail("control socket write failed");
}

void IbConnection::onCompletion(const ibv_wc& wc) {
  const int qp = static_cast<int>((wc.wr_id >> 1) & 0x1f);  // see connection_send.cc: dataWrId
  const bool isRecv = (wc.wr_id & 1) != 0;
  ++events_;
  if (wc.status != IBV_WC_SUCCESS) {
    fail(std::string("completion error: ") + v_->wcStatusStr(wc.status) + " (vendor error " +
         std::to_string(wc.vendor_err) + ")");
    return;
  }
  if (qp < 0 || qp >= static_cast<int>(qps_.size())) {
    fail("completion for an unknown queue pair");
    return;
  }
  if (!isRecv) {
    if (sendsOutstanding_[qp] > 0) --sendsOutstanding_[qp];
    onSendCompletion(wc.wr_id);
    return;
  }
  postRecv(qp);
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
    fail("sent a message without an immediate");
    return;
  }
  const uint32_t imm = ntohl(wc.imm_data);
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (imm & kCreditBit) && (imm & kOfferBit)) {
    onOffer(imm & kCreditMask);
    return;
  }
  if (wc.opcode == IBV_WC_RECV && (imm & kCreditBit) && !(imm & kOfferBit)) {
    const uint32_t value = imm & kCreditMask;
    const uint32_t delta = (value - lastCredit_) & kCreditMask;
    if (credited_ + delta > wired_) {
      fail("returned credit for messages never sent");
      return;
    }
    credited_ += delta;
    lastCredit_ = value;
    return;
  }
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (imm & kCreditBit)) {
    fail("sent a garbage control message");
    return;
  }
  DataImmediate d;
  std::string why;
  if (!decodeDataImmediate(imm, p_.slots, static_cast<uint32_t>(qps_.size()), &d, &why)) {
    fail(why);
    return;
  }
  const uint32_t slot = d.slot, parts = d.parts;
  // More parts than announced, or a different count for the same slot: the peer ignores the
  // protocol (or the credits).
  if ((partsExpected_[slot] != 0 &&
       (partsExpected_[slot] != parts || landed_[slot] != (d.landed ? 1 : 0))) ||
      partsGot_[slot] >= parts) {
    fail("sent a garbage control message (slot " + std::to_string(slot) + ", parts " +
         std::to_string(parts) + ")");
    return;
  }
  partsExpected_[slot] = parts;
  landed_[slot] = d.landed ? 1 : 0;
  ++partsGot_[slot];
  bytesGot_[slot] += wc.byte_len;
}

bool IbConnection::progress() {
  if (failed_.load(std::memory_order_relaxed)) return false;
  const bool haveSocket = takeControlSocket();
  if ((!connected_ || !peerReady_) && failIfSetupLate()) return false;
  if (!haveSocket) return true;
  // The peer's QpInfo first (onPeerSetup connects the queue pairs), then control bytes.
  readControl();
  if (!connected_) return !failed_.load();
  ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(cq_, 16, wc);
    if (n < 0) {
      fail("ibv_poll_cq failed");
      break;
    }
    for (int i = 0; i < n; ++i) onCompletion(wc[i]);
    if (n < 16) break;
  }
  flushPosts();
  flushCredit();
  return !failed_.load();
}

void IbConnection::flushCredit() {
  if (!creditPending_ || !connected_ || failed_.load() || sendsOutstanding_[0] >= sendCapacity_)
    return;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId(0, false);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.num_sge = 0;
  wr.imm_data = htonl(kCreditBit | static_cast<uint32_t>(received_ & kCreditMask));
  if (ibv_post_send(qps_[0], &wr, &bad)) {
    fail("ibv_post_send of a credit failed");
    return;
  }
  ++sendsOutstanding_[0];
  creditPending_ = false;
}

void* IbConnection::sendSlot() {
  std::lock_guard<std::mutex> lock(mu_);
  // A message may be written before the setup is done: it goes out once the queue pairs are.
  if (!progress() || posted_ - credited_ >= p_.slots) return nullptr;
  return static_cast<uint8_t*>(send_.base) + (posted_ % p_.slots) * stride() + kHeaderBytes;
}

const void* IbConnection::recvSlot(uint32_t* bytes, uint32_t* tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!progress()) return nullptr;
  const uint64_t slot = received_ % p_.slots;
  if (partsExpected_[slot] == 0 || partsGot_[slot] < partsExpected_[slot]) return nullptr;
  const uint8_t* header = static_cast<const uint8_t*>(recv_.base) + slot * stride();
  uint32_t t = 0, b = 0;
  uint64_t seq = 0;
  std::memcpy(&t, header, 4);
  std::memcpy(&b, header + 4, 4);
  std::memcpy(&seq, header + 8, 8);
  const bool landed = landed_[slot] != 0;
  if (seq != received_ || b > p_.slotBytes || bytesGot_[slot] != (landed ? 0 : kHeaderBytes) + b) {
    fail("sent a malformed message (sequence " + std::to_string(seq) + ", expected " +
         std::to_string(received_) + ", " + std::to_string(b) + " B)");
    return nullptr;
  }
  const uint8_t* data = header + kHeaderBytes;
  if (landed) {
    // Written into our landing: only where our own walk of the offer puts it.
    if (!ownOffer_.active || received_ < ownOffer_.offer.startSeq || b == 0 ||
        !offerTakes(ownOffer_.offer, ownOffer_.at, t, b)) {
      fail("wrote a message into a landing this side did not offer it (" + std::to_string(b) +
           " B)");
      return nullptr;
    }
    data = reinterpret_cast<const uint8_t*>(ownOffer_.offer.addr + ownOffer_.at);
  }
  handedBytes_ = b;
  handedTag_ = t;
  *bytes = b;
  *tag = t;
  return data;
}

void IbConnection::release() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t slot = received_ % p_.slots;
  partsExpected_[slot] = 0;
  partsGot_[slot] = 0;
  bytesGot_[slot] = 0;
  landed_[slot] = 0;
  if (ownOffer_.active && received_ >= ownOffer_.offer.startSeq)
    walkOwnOffer(handedTag_, handedBytes_);
  ++received_;
  creditPending_ = true;
  flushCredit();
}

}  // namespace weft::ib
