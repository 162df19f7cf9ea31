// The receiving half of a tcp Link: reading frames from its sockets into the receive slots, in
// sequence order across the link's sockets (see link.h).
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "src/common/log.h"
#include "transports/tcp/link.h"

namespace weft::tcp {

void Link::readSome(int index) {
  Sock& s = *socks_[index];
  while (!failed_.load(std::memory_order_relaxed) && !s.eof) {
    if (s.parked.load(std::memory_order_relaxed)) {
      if (s.frame.seq >= recvHead_.load(std::memory_order_seq_cst) + p_.slots) return;
      s.parked.store(false);
      parkedCount_.fetch_sub(1);
      std::string why;
      if (!acceptFrame(s, &why)) {
        fail("tcp: " + why + " from " + peerName());
        return;
      }
      continue;
    }
    char* dst;
    size_t want;
    if (!s.inPayload) {
      dst = reinterpret_cast<char*>(s.header) + s.headerGot;
      want = kFrameHeaderBytes - s.headerGot;
    } else {
      dst =
          recvBuf_.data() + (s.frame.seq % p_.slots) * p_.slotBytes + s.frame.offset + s.payloadGot;
      want = s.frame.length - s.payloadGot;
    }
    ssize_t n = ::recv(s.fd, dst, want, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK)) {
        // Mid-payload, ask the kernel to report the socket readable only once the rest of the
        // stripe is there: one wake-up per stripe instead of one per arriving segment.
        int lowat = s.inPayload ? static_cast<int>(std::min(want, s.maxLowat)) : 1;
        if (lowat != s.lowat &&
            ::setsockopt(s.fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) == 0)
          s.lowat = lowat;
        return;
      }
      fail(sysError("tcp: receive from " + peerName(), errno));
      return;
    }
    if (n == 0) {
      if (s.inPayload || s.headerGot > 0) {
        fail("tcp: " + peerName() + " closed the connection in the middle of a message");
        return;
      }
      // At a frame boundary this is how a peer that destroyed its communicator says goodbye.
      // Other sockets may still hold frames for us, so the link ends only once every socket
      // has; even then it is an error only for a lane still waiting for a message the link
      // does not hold (peerEnded()).
      s.eof = true;
      if (eofCount_.fetch_add(1) + 1 == p_.sockets) {
        WEFT_INFO(NET, "rank %d: tcp: %s closed the connection", p_.rank, peerName().c_str());
        peerClosed_.store(true);
        ring();
      }
      return;
    }
    if (s.inPayload) {
      s.payloadGot += static_cast<size_t>(n);
      if (s.payloadGot == s.frame.length) partReceived(s);
      continue;
    }
    s.headerGot += static_cast<size_t>(n);
    if (s.headerGot < kFrameHeaderBytes) continue;
    s.headerGot = 0;
    std::string why;
    if (!decodeFrame(s.header, p_.slotBytes, &s.frame, &why)) {
      fail("tcp: " + why + " from " + peerName());
      return;
    }
    const uint64_t head = recvHead_.load(std::memory_order_seq_cst);
    if (s.frame.seq < s.lastSeq || s.frame.seq < head || s.frame.seq - head > (1ull << 32)) {
      fail("tcp: frame with sequence " + std::to_string(s.frame.seq) + " out of order from " +
           peerName());
      return;
    }
    s.lastSeq = s.frame.seq;
    if (s.frame.seq >= head + p_.slots) {
      // Its slot is still in use: stop reading this socket until the executor releases one.
      s.parked.store(true, std::memory_order_seq_cst);
      parkedCount_.fetch_add(1, std::memory_order_seq_cst);
      if (s.frame.seq >= recvHead_.load(std::memory_order_seq_cst) + p_.slots) return;
      s.parked.store(false);
      parkedCount_.fetch_sub(1);
    }
    if (!acceptFrame(s, &why)) {
      fail("tcp: " + why + " from " + peerName());
      return;
    }
  }
}

bool Link::acceptFrame(Sock& s, std::string* why) {
  const FrameHeader& f = s.frame;
  {
    std::lock_guard<std::mutex> lock(metaMu_);
    RecvMeta& m = meta_[f.seq % p_.slots];
    if (m.seq != f.seq) {
      m = RecvMeta{};
      m.seq = f.seq;
      m.total = f.total;
      m.tag = f.tag;
      m.parts = f.parts;
    } else if (m.total != f.total || m.tag != f.tag || m.parts != f.parts) {
      *why = "stripes of one message disagree";
      return false;
    }
    if (m.mask & (1ull << f.part)) {
      *why = "duplicate stripe";
      return false;
    }
  }
  s.payloadGot = 0;
  s.inPayload = true;
  if (f.length == 0) partReceived(s);
  return true;
}

void Link::partReceived(Sock& s) {
  s.inPayload = false;
  const FrameHeader& f = s.frame;
  bool advanced = false, duplicate = false;
  {
    std::lock_guard<std::mutex> lock(metaMu_);
    RecvMeta& m = meta_[f.seq % p_.slots];
    // Checked again here: two sockets carrying the same stripe may have raced past acceptFrame.
    duplicate = m.seq != f.seq || (m.mask & (1ull << f.part));
  }
  if (duplicate) {
    fail("tcp: duplicate stripe from " + peerName());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(metaMu_);
    RecvMeta& m = meta_[f.seq % p_.slots];
    m.mask |= 1ull << f.part;
    if (static_cast<uint32_t>(std::popcount(m.mask)) == m.parts) m.complete = true;
    uint64_t r = recvReady_.load(std::memory_order_relaxed);
    const uint64_t limit = recvHead_.load(std::memory_order_acquire) + p_.slots;
    while (r < limit) {
      const RecvMeta& x = meta_[r % p_.slots];
      if (x.seq != r || !x.complete) break;
      ++r;
    }
    if (r != recvReady_.load(std::memory_order_relaxed)) {
      recvReady_.store(r, std::memory_order_release);
      advanced = true;
    }
  }
  if (advanced) ring();
}

}  // namespace weft::tcp
