#include "transports/ib/progress.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "src/common/error.h"
#include "src/common/log.h"
#include "transports/ib/connection.h"

namespace weft::ib {
namespace {

// The longest sleep: setup deadlines are checked at least this often.
constexpr int kPollTimeoutMs = 100;

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

ProgressThread& ProgressThread::get() { return perProcess<ProgressThread>(); }

ProgressThread::ProgressThread() {
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0)
    weft::fail(Status::kSystemError, "ib: eventfd: " + std::string(std::strerror(errno)));
  thread_ = std::thread([this] { loop(); });
  thread_.detach();
}

void ProgressThread::add(IbConnection* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
    ibv_context* context = c->deviceContext();
    if (std::find(contexts_.begin(), contexts_.end(), context) == contexts_.end()) {
      setNonBlocking(context->async_fd);
      contexts_.push_back(context);
    }
  }
  wake();
}

void ProgressThread::remove(IbConnection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
}

void ProgressThread::wake() {
  uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof(one));
}

void ProgressThread::drainAsyncEvents(ibv_context* context) {
  const Verbs* v = verbs();
  ibv_async_event e{};
  while (v->getAsyncEvent(context, &e) == 0) {
    const char* what = v->eventTypeStr(e.event_type);
    switch (e.event_type) {
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_DEVICE_FATAL: {
        const int port = e.event_type == IBV_EVENT_PORT_ERR ? e.element.port_num : -1;
        WEFT_WARN(NET, "ib: device event %s (port %d)", what, port);
        for (IbConnection* c : conns_)
          if (c->deviceContext() == context && (port < 0 || c->portNumber() == port))
            c->failFromDevice(std::string("its port went down (") + what + ")");
        break;
      }
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        for (IbConnection* c : conns_)
          if (c->ownsQp(e.element.qp))
            c->failFromDevice(std::string("queue pair error (") + what + ")");
        break;
      case IBV_EVENT_CQ_ERR:
        for (IbConnection* c : conns_)
          if (c->ownsCq(e.element.cq))
            c->failFromDevice(std::string("completion queue error (") + what + ")");
        break;
      default:
        WEFT_INFO(NET, "ib: device event %s", what);
        break;
    }
    v->ackAsyncEvent(&e);
  }
}

void ProgressThread::loop() {
  std::vector<pollfd> fds;
  std::vector<int> connFds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_, POLLIN, 0});
    size_t contexts = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (ibv_context* context : contexts_) fds.push_back({context->async_fd, POLLIN, 0});
      contexts = contexts_.size();
      for (IbConnection* c : conns_) {
        connFds.clear();
        c->watchedFds(&connFds);
        for (int fd : connFds) fds.push_back({fd, POLLIN, 0});
      }
    }
    ::poll(fds.data(), fds.size(), kPollTimeoutMs);
    uint64_t count = 0;
    (void)!::read(wake_, &count, sizeof(count));
    if (held_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    // The device list only grows, so the first `contexts` entries are the ones polled.
    for (size_t i = 0; i < contexts; ++i)
      if (fds[1 + i].revents) drainAsyncEvents(contexts_[i]);
    for (IbConnection* c : conns_) c->backgroundPass();
  }
}

}  // namespace weft::ib
