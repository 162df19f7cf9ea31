#include "transports/ib/progress.h"

#include <fcntl.h>

#include <algorithm>

#include "src/common/error.h"
#include "src/common/log.h"

namespace weft::ib {
namespace {

// The longest sleep: setup deadlines are checked at least this often. Completions, control
// bytes and device events end it at once, so the thread never polls faster.
constexpr remote::ProgressPacing kPacing{
    std::chrono::milliseconds(100), std::chrono::milliseconds(100), std::chrono::milliseconds(0)};

void setNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

DeviceClient& deviceClient(remote::ProgressClient* c) {
  auto* d = dynamic_cast<DeviceClient*>(c);
  if (!d) weft::fail(Status::kInternalError, "ib: a progress client without a device");
  return *d;
}

}  // namespace

ProgressThread& ProgressThread::get() { return perProcess<ProgressThread>(); }

ProgressThread::ProgressThread() : remote::ProgressThread("ib", kPacing) { start(); }

void ProgressThread::onAdd(remote::ProgressClient* c) {
  ibv_context* context = deviceClient(c).deviceContext();
  if (std::find(contexts_.begin(), contexts_.end(), context) == contexts_.end()) {
    setNonBlocking(context->async_fd);
    contexts_.push_back(context);
  }
}

void ProgressThread::watchOwnFds(std::vector<pollfd>* fds) {
  for (ibv_context* context : contexts_) fds->push_back({context->async_fd, POLLIN, 0});
}

void ProgressThread::onOwnFds(const pollfd* fds, size_t count) {
  // The device list only grows, so the first `count` entries are the ones polled.
  for (size_t i = 0; i < count; ++i)
    if (fds[i].revents) drainAsyncEvents(contexts_[i]);
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
        for (remote::ProgressClient* c : clients()) {
          DeviceClient& d = deviceClient(c);
          if (d.deviceContext() == context && (port < 0 || d.portNumber() == port))
            d.failFromDevice(std::string("its port went down (") + what + ")");
        }
        break;
      }
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        for (remote::ProgressClient* c : clients())
          if (deviceClient(c).ownsQp(e.element.qp))
            deviceClient(c).failFromDevice(std::string("queue pair error (") + what + ")");
        break;
      case IBV_EVENT_CQ_ERR:
        for (remote::ProgressClient* c : clients())
          if (deviceClient(c).ownsCq(e.element.cq))
            deviceClient(c).failFromDevice(std::string("completion queue error (") + what + ")");
        break;
      default:
        WEFT_INFO(NET, "ib: device event %s", what);
        break;
    }
    v->ackAsyncEvent(&e);
  }
}

}  // namespace weft::ib
