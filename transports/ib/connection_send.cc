// IbConnection's send path beyond plain slots: messages by reference (written from registered
// user memory), landings (the peer's offered destination, walked as wire.h says) and
// ncclCommRegister's registrations.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "src/common/log.h"
#include "src/common/reduce.h"
#include "transports/ib/connection.h"

namespace weft::ib {
namespace {

constexpr uint64_t kMinPart = 8192;  // smallest part of a message on one queue pair
constexpr uint64_t kDataWr = 1u << 6;

// Work request ids: bit 0 receive, bits 1-5 the queue pair, bit 6 a write of a message whose
// send slot (sequence modulo slots) is in bits 8 and up.
uint64_t dataWrId(int qp, uint32_t slot) {
  return static_cast<uint64_t>(slot) << 8 | kDataWr | static_cast<uint64_t>(qp) << 1;
}

}  // namespace

void IbConnection::writeHeader(uint64_t seq, uint32_t bytes, uint32_t tag) {
  uint8_t* header = static_cast<uint8_t*>(send_.base) + (seq % p_.slots) * stride();
  std::memcpy(header, &tag, 4);
  std::memcpy(header + 4, &bytes, 4);
  std::memcpy(header + 8, &seq, 8);
}

void IbConnection::post(uint32_t bytes, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > p_.slotBytes || posted_ - credited_ >= p_.slots) {
    fail("posted a message of " + std::to_string(bytes) + " B without a free send slot");
    return;
  }
  const uint64_t slotData =
      reinterpret_cast<uint64_t>(send_.base) + (posted_ % p_.slots) * stride() + kHeaderBytes;
  queueMessage(bytes, tag, slotData, send_.mr->lkey, nullptr);
}

bool IbConnection::peerCanRead(const void*, size_t bytes) { return bytes <= p_.slotBytes; }

void IbConnection::postReference(const void* addr, uint32_t bytes, uint32_t tag) {
  std::unique_lock<std::mutex> lock(mu_);
  if (bytes > p_.slotBytes || posted_ - credited_ >= p_.slots) {
    fail("posted a reference of " + std::to_string(bytes) + " B without a free send slot");
    return;
  }
  std::string why;
  const MrCache::Region* region = cache_->acquire(addr, bytes, &why);
  if (!region) {
    // Not registrable (e.g. read-only or device memory): the slot carries it.
    WEFT_INFO(NET, "ib: %s: sending %u B through a slot: %s", peerName().c_str(), bytes,
              why.c_str());
    uint8_t* slot = static_cast<uint8_t*>(send_.base) + (posted_ % p_.slots) * stride();
    std::memcpy(slot + kHeaderBytes, addr, bytes);
    lock.unlock();
    post(bytes, tag);
    return;
  }
  queueMessage(bytes, tag, reinterpret_cast<uint64_t>(addr), region->keys.lkey, region);
}

void IbConnection::queueMessage(uint32_t bytes, uint32_t tag, uint64_t from, uint32_t lkey,
                                const MrCache::Region* region) {
  const uint64_t seq = posted_;
  writeHeader(seq, bytes, tag);
  Sent& m = sent_[seq % p_.slots];
  m = Sent{};
  m.bytes = bytes;
  m.tag = tag;
  m.from = from;
  m.lkey = lkey;
  m.region = region;
  ++posted_;
  flushPosts();
}

uint64_t IbConnection::postedCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return posted_;
}

bool IbConnection::consumed(uint64_t count) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (completed_ >= count) return true;
  const_cast<IbConnection*>(this)->progress();
  return completed_ >= count;
}

void IbConnection::flushPosts() {
  while (wired_ < posted_ && connected_ && peerReady_ && !failed_.load()) {
    if (!wireMessage(wired_)) return;
    ++wired_;
  }
}

bool IbConnection::postWrite(int qp, uint64_t id, uint64_t localAddr, uint32_t lkey,
                             uint64_t length, uint64_t remoteAddr, uint32_t rkey, bool withImm,
                             uint32_t imm) {
  ibv_sge sge{localAddr, static_cast<uint32_t>(length), lkey};
  return postGatherWrite(qp, id, &sge, 1, remoteAddr, rkey, withImm, imm);
}

bool IbConnection::postGatherWrite(int qp, uint64_t id, ibv_sge* sges, int count,
                                   uint64_t remoteAddr, uint32_t rkey, bool withImm, uint32_t imm) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = id;
  wr.opcode = withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.sg_list = sges;
  wr.num_sge = count;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  if (ibv_post_send(qps_[qp], &wr, &bad)) {
    fail("ibv_post_send failed");
    return false;
  }
  ++sendsOutstanding_[qp];
  return true;
}

bool IbConnection::wireMessage(uint64_t seq) {
  const uint32_t slot = static_cast<uint32_t>(seq % p_.slots);
  Sent& m = sent_[slot];
  // Walk the peer's offer to this message: taken ones of a byte or more go into the landing.
  bool landed = false;
  uint64_t landing = 0;
  const bool walks = peerOffer_.active && peerOffer_.nextSeq == seq;
  const bool takes = walks && offerTakes(peerOffer_.offer, peerOffer_.at, m.tag, m.bytes);
  if (takes && m.bytes > 0) {
    if (!landingTarget(peerOffer_.offer, peerOffer_.at, m.bytes, &landing)) {
      fail("a landing write would leave the offered range");
      return false;
    }
    landed = true;
  }
  // A landed message's parts carry its data only (its header is written into its slot first).
  const uint64_t total = landed ? m.bytes : kHeaderBytes + m.bytes;
  const uint32_t parts =
      static_cast<uint32_t>(std::clamp<uint64_t>(total / kMinPart, 1, qps_.size()));
  // Room for every write, and one entry left on queue pair 0 for a credit.
  for (uint32_t i = 0; i < parts; ++i)
    if (sendsOutstanding_[i] + 2 + (landed && i == 0 ? 1 : 0) > sendCapacity_) return false;
  if (walks) {
    if (takes) {
      peerOffer_.at += m.bytes;
      peerOffer_.nextSeq = seq + 1;
      if (peerOffer_.at == peerOffer_.offer.bytes) peerOffer_.active = false;
    } else {
      peerOffer_.active = false;  // another operation's message, or past the offer's end
    }
  }
  const uint64_t header = reinterpret_cast<uint64_t>(send_.base) + slot * stride();
  const uint64_t peerSlot = peer_.recvAddr + static_cast<uint64_t>(slot) * stride();
  m.writesLeft = parts + (landed ? 1 : 0);
  if (landed && !postWrite(0, dataWrId(0, slot), header, send_.mr->lkey, kHeaderBytes, peerSlot,
                           peer_.recvKey, false, 0))
    return false;
  const uint32_t imm = dataImmediate(slot, parts, landed);
  for (uint32_t i = 0; i < parts; ++i) {
    const uint64_t from = total * i / parts, to = total * (i + 1) / parts;
    if (landed) {
      if (!postWrite(static_cast<int>(i), dataWrId(static_cast<int>(i), slot), m.from + from,
                     m.lkey, to - from, landing + from, peerOffer_.offer.rkey, true, imm))
        return false;
      continue;
    }
    // Inside the peer's registered FIFO: slot < slots, and the peer's FIFO has this side's shape
    // and an address range that does not wrap (checkPeerInfo). The header comes from the send
    // slot, the data from the slot or the referenced buffer.
    ibv_sge sge[2];
    int n = 0;
    if (from < kHeaderBytes)
      sge[n++] = {header + from, static_cast<uint32_t>(std::min<uint64_t>(to, kHeaderBytes) - from),
                  send_.mr->lkey};
    if (to > kHeaderBytes) {
      const uint64_t d = std::max<uint64_t>(from, kHeaderBytes) - kHeaderBytes;
      const uint64_t len = to - kHeaderBytes - d;
      if (n == 1 && m.from == header + kHeaderBytes)
        sge[0].length += static_cast<uint32_t>(len);  // data follows its header in the slot
      else
        sge[n++] = {m.from + d, static_cast<uint32_t>(len), m.lkey};
    }
    if (!postGatherWrite(static_cast<int>(i), dataWrId(static_cast<int>(i), slot), sge, n,
                         peerSlot + from, peer_.recvKey, true, imm))
      return false;
  }
  return true;
}

void IbConnection::onSendCompletion(uint64_t id) {
  if (!(id & kDataWr)) return;
  Sent& m = sent_[(id >> 8) % p_.slots];
  if (m.writesLeft > 0) --m.writesLeft;
  while (completed_ < wired_ && sent_[completed_ % p_.slots].writesLeft == 0) {
    Sent& done = sent_[completed_ % p_.slots];
    cache_->release(done.region);
    done.region = nullptr;
    ++completed_;
  }
}

void IbConnection::onOffer(uint32_t entry) {
  if (entry >= mailboxEntries(p_.slots)) {
    fail("sent a landing offer outside the mailbox");
    return;
  }
  LandingOffer o;
  std::memcpy(&o,
              static_cast<const uint8_t*>(recv_.base) + fifoBytes(p_.slots, p_.slotBytes) +
                  static_cast<uint64_t>(entry) * sizeof(LandingOffer),
              sizeof(o));
  const std::string bad = checkLandingOffer(o, entry, p_.slots, credited_, wired_);
  if (!bad.empty()) {
    fail(bad);
    return;
  }
  // Messages already sent went to slots: the offer's walk passes over them.
  peerOffer_ = {true, o, o.startSeq, 0};
  for (uint64_t seq = o.startSeq; seq < wired_ && peerOffer_.active; ++seq) {
    const Sent& m = sent_[seq % p_.slots];
    if (!offerTakes(o, peerOffer_.at, m.tag, m.bytes)) {
      peerOffer_.active = false;
      break;
    }
    peerOffer_.at += m.bytes;
    peerOffer_.nextSeq = seq + 1;
    if (peerOffer_.at == o.bytes) peerOffer_.active = false;
  }
}

bool IbConnection::offerLanding(void* dst, size_t bytes, uint32_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  // One offer at a time; the queue pairs must be up, with room for the offer and a credit.
  if (!progress() || !connected_ || !peerReady_ || ownOffer_.active || bytes == 0 ||
      bytes > kMaxLandingBytes || sendsOutstanding_[0] + 2 > sendCapacity_)
    return false;
  std::string why;
  const MrCache::Region* region = cache_->acquire(dst, bytes, &why);
  if (!region) {
    WEFT_INFO(NET, "ib: %s: no landing: %s", peerName().c_str(), why.c_str());
    return false;
  }
  LandingOffer o;
  o.startSeq = received_;
  o.addr = reinterpret_cast<uint64_t>(dst);
  o.bytes = bytes;
  o.tag = tag;
  o.rkey = region->keys.rkey;
  const uint32_t entry = static_cast<uint32_t>(received_ % mailboxEntries(p_.slots));
  const uint64_t at = fifoBytes(p_.slots, p_.slotBytes) + uint64_t{entry} * sizeof(LandingOffer);
  // Staged in the send region's entry of the same index: it is written again only after
  // 2 x slots more messages, long after the queue pair read it (the writes are in order).
  std::memcpy(static_cast<uint8_t*>(send_.base) + at, &o, sizeof(o));
  if (!postWrite(0, 0, reinterpret_cast<uint64_t>(send_.base) + at, send_.mr->lkey, sizeof(o),
                 peer_.recvAddr + at, peer_.recvKey, true, kCreditBit | kOfferBit | entry)) {
    cache_->release(region);
    return false;
  }
  ownOffer_ = {true, o, 0, region};
  ++offersPosted_;
  return true;
}

void IbConnection::walkOwnOffer(uint32_t tag, uint32_t bytes) {
  if (!offerTakes(ownOffer_.offer, ownOffer_.at, tag, bytes)) {
    dropOwnOffer();
    return;
  }
  ownOffer_.at += bytes;
  if (ownOffer_.at == ownOffer_.offer.bytes) dropOwnOffer();
}

void IbConnection::dropOwnOffer() {
  cache_->release(ownOffer_.region);
  ownOffer_ = OwnOffer{};
}

bool IbConnection::awaitPeerOutOfMemory(std::chrono::milliseconds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ownOffer_.active && completed_ >= wired_) return true;
  // A queue pair in the error state neither takes the peer's writes nor reads ours any more.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  for (ibv_qp* qp : qps_) v_->modifyQp(qp, &a, IBV_QP_STATE);
  fail("stopped: an operation using it was given up");
  return true;
}

void IbConnection::readRemote(void*, uint64_t, size_t) {
  weft::fail(Status::kInternalError, "ib: no message names remote memory to read");
}

void IbConnection::land(void* dst, const void* src, size_t bytes, Store store) {
  if (dst != src) copyElements(DataType::kUint8, dst, src, bytes, nullptr, store);
}

void IbConnection::postLanded(uint32_t, uint32_t) {
  weft::fail(Status::kInternalError, "ib: landingFor offers no pointer to write into");
}

bool IbConnection::registerMemory(const void* owner, const void* addr, size_t bytes,
                                  std::string* why) {
  return cache_->registerOwned(owner, addr, bytes, why);
}

void IbConnection::deregisterMemory(const void* owner, const void* addr, size_t bytes) {
  cache_->deregisterOwned(owner, addr, bytes);
}

void IbConnection::postOfferForTesting(const LandingOffer& offer, uint32_t entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!connected_ || !peerReady_) return;
  const uint64_t at = fifoBytes(p_.slots, p_.slotBytes) +
                      uint64_t{entry % mailboxEntries(p_.slots)} * sizeof(LandingOffer);
  std::memcpy(static_cast<uint8_t*>(send_.base) + at, &offer, sizeof(offer));
  postWrite(0, 0, reinterpret_cast<uint64_t>(send_.base) + at, send_.mr->lkey, sizeof(offer),
            peer_.recvAddr + at, peer_.recvKey, true, kCreditBit | kOfferBit | entry);
}

bool IbConnection::peerOfferActiveForTesting() {
  std::lock_guard<std::mutex> lock(mu_);
  progress();
  return peerOffer_.active;
}

}  // namespace weft::ib
