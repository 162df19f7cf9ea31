#include "src/bootstrap/root.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/drop_log.h"
#include "src/bootstrap/wire.h"
#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::bootstrap {
namespace {

// Unauthenticated connections held at once, so a flood cannot exhaust fds. When full, the oldest
// one that has sent nothing is evicted: a rank sends its hello as soon as it connects, so idle
// strangers can never crowd out the ranks.
constexpr size_t kMaxPending = 256;
// Connections accepted per pass, so a flood cannot starve the ranks already connected.
constexpr size_t kAcceptsPerPass = 512;
// How long the root waits to deliver a reply before giving up on that rank.
constexpr std::chrono::milliseconds kReplyTimeout{5000};
// How long the root waits for the ranks to close their connections after the table: the side
// that closes first keeps the connection in TIME_WAIT, and that must be the rank's ephemeral
// port, not the listen port (a host running many short jobs would run out of ports to listen on).
constexpr std::chrono::milliseconds kCloseWait{2000};

class RootServer {
 public:
  RootServer(Socket listen, const Secret& secret, std::chrono::milliseconds timeout, int stopFd)
      : listen_(std::move(listen)),
        secret_(secret),
        timeout_(timeout),
        stopFd_(stopFd),
        name_(listen_.localAddress().toString()) {}

  void run();

 private:
  struct Pending {
    Socket sock;
    SocketAddress peer;
    Clock::time_point deadline;
    uint8_t hello[wire::kRootHelloBytes] = {};
    size_t got = 0;
  };
  struct Member {
    Socket sock;
    SocketAddress peer;
    SocketAddress listen;
  };

  void acceptAll(const Deadline& end);
  void evictOnePending();
  void dropped(const Pending& p, const std::string& why);
  bool advance(Pending& p);  // true when the connection is finished with (kept or dropped)
  void handleHello(Pending& p);
  void reject(Pending& p, wire::RootStatus status, int rank, int nranks);
  void checkMember(int rank);
  bool allMembersAlive();
  void dropMember(int rank, const char* why);
  void reply(const Socket& sock, const uint8_t* data, size_t bytes, const std::string& who);
  void sendTables();
  void awaitRanksClosing();
  void timeOut();

  Socket listen_;
  const Secret secret_;
  const std::chrono::milliseconds timeout_;
  const int stopFd_;
  const std::string name_;
  std::vector<Pending> pending_;
  DropLog drops_;
  // By rank, once the first valid hello fixes nranks; pointers keep a huge nranks cheap.
  std::vector<std::unique_ptr<Member>> members_;
  int nranks_ = 0;
  int arrived_ = 0;
};

void RootServer::run() {
  Deadline end(timeout_);
  std::vector<pollfd> fds;
  std::vector<int> memberRanks;
  WEFT_TRACE(BOOTSTRAP, "bootstrap root %s: serving for up to %lld ms", name_.c_str(),
             static_cast<long long>(timeout_.count()));
  for (;;) {
    if (nranks_ > 0 && arrived_ == nranks_ && allMembersAlive()) return sendTables();
    if (end.expired()) return timeOut();

    fds.clear();
    memberRanks.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    fds.push_back({listen_.fd(), POLLIN, 0});
    for (int r = 0; r < static_cast<int>(members_.size()); ++r) {
      if (!members_[r]) continue;
      fds.push_back({members_[r]->sock.fd(), POLLIN, 0});
      memberRanks.push_back(r);
    }
    for (const auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});

    auto wait = end.remaining();
    auto now = Clock::now();
    for (const auto& p : pending_)
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(
                                std::max(p.deadline - now, Clock::duration::zero())));
    int ms = static_cast<int>(std::min<long long>(wait.count() + 1, INT_MAX));
    if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) {
      WEFT_WARN(BOOTSTRAP, "%s", sysError("bootstrap root " + name_ + ": poll", errno).c_str());
      return;
    }
    if (fds[0].revents) return;  // process exit

    for (size_t k = 0; k < memberRanks.size(); ++k) {
      size_t r = static_cast<size_t>(memberRanks[k]);
      if (fds[2 + k].revents && r < members_.size() && members_[r]) checkMember(memberRanks[k]);
    }
    for (size_t i = 0; i < pending_.size();) {
      if (advance(pending_[i])) {
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      } else if (Clock::now() >= pending_[i].deadline) {
        dropped(pending_[i], "no complete hello within " +
                                 std::to_string(kHandshakeTimeout.count()) + " ms (" +
                                 std::to_string(pending_[i].got) + " bytes received)");
        pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    if (fds[1].revents) acceptAll(end);
  }
}

void RootServer::acceptAll(const Deadline& end) {
  for (size_t accepted = 0; accepted < kAcceptsPerPass; ++accepted) {
    SocketAddress peer;
    Socket s = listen_.tryAccept(&peer);
    if (!s.valid()) return;
    if (pending_.size() >= kMaxPending) evictOnePending();
    Pending p;
    p.sock = std::move(s);
    p.peer = peer;
    p.deadline = Clock::now() + std::min(kHandshakeTimeout, end.remaining());
    pending_.push_back(std::move(p));
    // The hello usually arrives with the connection: serve it without another poll round.
    if (advance(pending_.back())) pending_.pop_back();
  }
}

void RootServer::evictOnePending() {
  // pending_ is in arrival order: evict the oldest silent connection, else the oldest.
  auto victim =
      std::find_if(pending_.begin(), pending_.end(), [](const Pending& p) { return p.got == 0; });
  if (victim == pending_.end()) victim = pending_.begin();
  dropped(*victim, std::to_string(pending_.size()) +
                       " connections wait to authenticate, the oldest make way (" +
                       std::to_string(victim->got) + " hello bytes received)");
  pending_.erase(victim);
}

void RootServer::dropped(const Pending& p, const std::string& why) {
  drops_.note("bootstrap root " + name_ + ": dropped connection from " + p.peer.toString() + ": " +
              why);
}

bool RootServer::advance(Pending& p) {
  while (p.got < wire::kRootHelloBytes) {
    // Read the secret alone first: nothing else is looked at before it checks out.
    size_t want = (p.got < kSecretBytes ? kSecretBytes : wire::kRootHelloBytes) - p.got;
    size_t before = p.got;
    int err = 0;
    Socket::Io io = p.sock.readSome(p.hello + p.got, want, &p.got, &err);
    if (io == Socket::Io::kWouldBlock) return false;
    if (io == Socket::Io::kEof) {
      dropped(p, "closed after " + std::to_string(p.got) + " of " +
                     std::to_string(wire::kRootHelloBytes) + " hello bytes");
      return true;
    }
    if (io == Socket::Io::kError) {
      dropped(p, sysError("read failed", err));
      return true;
    }
    if (before < kSecretBytes && p.got == kSecretBytes && !secretsEqual(p.hello, secret_.data())) {
      dropped(p, "wrong secret");
      return true;
    }
  }
  handleHello(p);
  return true;
}

void RootServer::handleHello(Pending& p) {
  wire::RootHello h;
  bool ok = wire::decodeRootHello(p.hello, &h);
  if (!ok || h.version != wire::kRootHelloVersion || h.nranks < 1 || h.nranks > wire::kMaxRanks)
    return reject(p, wire::RootStatus::kBadHello, h.rank, h.nranks);
  if (h.rank < 0 || h.rank >= h.nranks)
    return reject(p, wire::RootStatus::kRankOutOfRange, h.rank, h.nranks);
  if (nranks_ != 0 && h.nranks != nranks_)
    return reject(p, wire::RootStatus::kNranksMismatch, h.rank, h.nranks);
  if (nranks_ == 0) {
    nranks_ = h.nranks;
    members_.clear();
    members_.resize(static_cast<size_t>(nranks_));
  }
  // A rank that lost its connection retries; its old one may not have been seen closing yet.
  if (members_[h.rank]) checkMember(h.rank);
  if (nranks_ == 0) {  // ...and was the only member so far
    nranks_ = h.nranks;
    members_.resize(static_cast<size_t>(nranks_));
  }
  if (members_[h.rank]) return reject(p, wire::RootStatus::kDuplicateRank, h.rank, h.nranks);
  WEFT_TRACE(BOOTSTRAP, "bootstrap root %s: rank %d of %d arrived from %s, listening on %s",
             name_.c_str(), h.rank, h.nranks, p.peer.toString().c_str(),
             h.listen.toString().c_str());
  members_[h.rank] = std::make_unique<Member>(Member{std::move(p.sock), p.peer, h.listen});
  ++arrived_;
}

void RootServer::reject(Pending& p, wire::RootStatus status, int rank, int nranks) {
  std::string who = p.peer.toString();
  if (status == wire::RootStatus::kBadHello)
    WEFT_WARN(BOOTSTRAP, "bootstrap root %s: rejected %s: malformed hello after a valid secret",
              name_.c_str(), who.c_str());
  else
    WEFT_WARN(BOOTSTRAP, "bootstrap root %s: rejected %s (rank %d of %d): %s", name_.c_str(),
              who.c_str(), rank, nranks, wire::rootStatusText(static_cast<uint32_t>(status)));
  uint8_t buf[wire::kRootReplyHeaderBytes];
  wire::encodeRootReply({static_cast<uint32_t>(status), nranks_, arrived_}, buf);
  reply(p.sock, buf, sizeof(buf), who);
}

void RootServer::checkMember(int rank) {
  uint8_t byte;
  size_t got = 0;
  int err = 0;
  switch (members_[rank]->sock.readSome(&byte, 1, &got, &err)) {
    case Socket::Io::kWouldBlock:
      return;
    case Socket::Io::kProgress:
      return dropMember(rank, "sent bytes after its hello");
    case Socket::Io::kEof:
      return dropMember(rank, "disconnected");
    case Socket::Io::kError:
      return dropMember(rank, "connection failed");
  }
}

bool RootServer::allMembersAlive() {
  // A rank that gave up and reconnects must not be sent the table on its dead connection.
  for (int r = 0; r < nranks_ && nranks_ > 0; ++r)
    if (members_[r]) checkMember(r);
  return nranks_ > 0 && arrived_ == nranks_;
}

void RootServer::dropMember(int rank, const char* why) {
  // The slot opens again, so a rank that gave up and retries can still complete the rendezvous.
  WEFT_WARN(BOOTSTRAP, "bootstrap root %s: rank %d (%s) %s before all %d ranks arrived",
            name_.c_str(), rank, members_[rank]->peer.toString().c_str(), why, nranks_);
  members_[rank].reset();
  if (--arrived_ == 0) {
    nranks_ = 0;
    members_.clear();
  }
}

void RootServer::reply(const Socket& sock, const uint8_t* data, size_t bytes,
                       const std::string& who) {
  try {
    sock.sendAll(data, bytes, Deadline(kReplyTimeout), stopFd_,
                 "bootstrap root " + name_ + ": replying to " + who);
  } catch (const Error& e) {
    WEFT_WARN(BOOTSTRAP, "%s", e.what());
  }
}

void RootServer::sendTables() {
  size_t n = static_cast<size_t>(nranks_);
  std::vector<uint8_t> buf(wire::kRootReplyHeaderBytes + n * wire::kAddressBytes);
  wire::encodeRootReply({static_cast<uint32_t>(wire::RootStatus::kOk), nranks_, arrived_},
                        buf.data());
  for (size_t r = 0; r < n; ++r)
    wire::encodeAddress(members_[r]->listen,
                        buf.data() + wire::kRootReplyHeaderBytes + r * wire::kAddressBytes);
  for (size_t r = 0; r < n; ++r)
    reply(members_[r]->sock, buf.data(), buf.size(),
          "rank " + std::to_string(r) + " (" + members_[r]->peer.toString() + ")");
  WEFT_INFO(BOOTSTRAP, "bootstrap root %s: rendezvous of %d ranks complete", name_.c_str(),
            nranks_);
  listen_.close();  // late or stray connections are refused from now on
  awaitRanksClosing();
}

void RootServer::awaitRanksClosing() {
  Deadline end(kCloseWait);
  std::vector<pollfd> fds;
  for (const auto& m : members_)
    if (m) fds.push_back({m->sock.fd(), POLLIN, 0});
  size_t open = fds.size();
  fds.push_back({stopFd_, POLLIN, 0});
  while (open > 0 && !end.expired()) {
    int ms = static_cast<int>(std::max<long long>(1, end.remaining().count()));
    int n = ::poll(fds.data(), fds.size(), ms);
    if (n < 0 && errno != EINTR) return;
    if (fds.back().revents) return;
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      // Ranks send nothing after their hello: readable means closed (or a violation).
      uint8_t byte;
      ssize_t got = ::recv(fds[i].fd, &byte, 1, MSG_DONTWAIT);
      if (got >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

void RootServer::timeOut() {
  if (nranks_ == 0) {
    // An id nobody used (a process may generate many); not worth a warning.
    WEFT_INFO(BOOTSTRAP, "bootstrap root %s: no rank arrived within %lld ms; exiting",
              name_.c_str(), static_cast<long long>(timeout_.count()));
    return;
  }
  std::string missing;
  int listed = 0;
  for (int r = 0; r < nranks_ && listed < 16; ++r)
    if (!members_[r]) missing += (listed++ ? "," : "") + std::to_string(r);
  if (nranks_ - arrived_ > listed) missing += ",...";
  WEFT_WARN(
      BOOTSTRAP, "bootstrap root %s: timed out after %lld ms with %d of %d ranks (missing: %s)",
      name_.c_str(), static_cast<long long>(timeout_.count()), arrived_, nranks_, missing.c_str());
  uint8_t buf[wire::kRootReplyHeaderBytes];
  wire::encodeRootReply({static_cast<uint32_t>(wire::RootStatus::kTimedOut), nranks_, arrived_},
                        buf);
  for (int r = 0; r < nranks_; ++r)
    if (members_[r]) reply(members_[r]->sock, buf, sizeof(buf), "rank " + std::to_string(r));
}

// Owns the root threads so they can be stopped and joined at exit instead of running detached.
class Registry {
 public:
  static Registry& instance() {
    // Leaked on purpose: its threads must outlive static destructors that might still run ids.
    static Registry* registry = [] {
      auto* r = new Registry();
      std::atexit([] { instance().stopAll(); });
      return r;
    }();
    return *registry;
  }

  void start(Socket listen, const Secret& secret, std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu_);
    reapLocked();
    auto entry = std::make_unique<Entry>();
    Entry* e = entry.get();
    auto server = std::make_shared<RootServer>(std::move(listen), secret, timeout, e->stop.fd());
    try {
      e->thread = std::thread([server, e] {
        server->run();
        e->done.store(true);
      });
    } catch (const std::system_error& ex) {
      fail(Status::kSystemError,
           std::string("bootstrap: cannot start the root thread: ") + ex.what());
    }
    entries_.push_back(std::move(entry));
  }

  size_t live() {
    std::lock_guard<std::mutex> lock(mu_);
    reapLocked();
    return entries_.size();
  }

 private:
  struct Entry {
    std::thread thread;
    std::atomic<bool> done{false};
    EventFd stop;
  };

  void reapLocked() {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void stopAll() {
    // A forked child inherits the entries but not the threads.
    if (::getpid() != pid_) return;
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    for (auto& e : entries_) e->stop.signal();
    for (auto& e : entries_) e->thread.join();
    entries_.clear();
  }

  std::mutex mu_;
  std::list<std::unique_ptr<Entry>> entries_;
  const pid_t pid_ = ::getpid();
};

}  // namespace

void startRoot(Socket listen, const Secret& secret, std::chrono::milliseconds timeout) {
  Registry::instance().start(std::move(listen), secret, timeout);
}

size_t liveRootCount() { return Registry::instance().live(); }

}  // namespace weft::bootstrap
