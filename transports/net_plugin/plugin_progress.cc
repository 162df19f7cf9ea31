#include "transports/net_plugin/plugin_progress.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "src/common/error.h"
#include "transports/net_plugin/plugin_connection.h"

namespace weft::netplugin {
namespace {

// Sleeps between passes: short while connections move or wait on the plugin (many plugins make
// progress only when called), long while all are idle (a control byte or a wake() still ends
// it at once; setup deadlines are checked at least this often).
constexpr int kBusyPollMs = 1;
constexpr int kIdlePollMs = 20;
// How long after the last movement connections count as busy.
constexpr auto kBusyAfterMove = std::chrono::milliseconds(200);

}  // namespace

ProgressThread& ProgressThread::get() { return perProcess<ProgressThread>(); }

ProgressThread::ProgressThread() {
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0)
    weft::fail(Status::kSystemError, "net plugin: eventfd: " + std::string(std::strerror(errno)));
  thread_ = std::thread([this] { loop(); });
  thread_.detach();
}

void ProgressThread::add(PluginConnection* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.push_back(c);
  }
  wake();
}

void ProgressThread::remove(PluginConnection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  conns_.erase(std::remove(conns_.begin(), conns_.end(), c), conns_.end());
}

void ProgressThread::wake() {
  uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof(one));
}

void ProgressThread::loop() {
  std::vector<pollfd> fds;
  auto lastMove = std::chrono::steady_clock::now() - kBusyAfterMove;
  for (;;) {
    bool busy = false;
    fds.clear();
    fds.push_back({wake_, POLLIN, 0});
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (PluginConnection* c : conns_) {
        if (c->backgroundPass()) lastMove = std::chrono::steady_clock::now();
        busy = busy || c->busy();
        int fd = c->controlFd();
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
      }
      busy =
          busy || (!conns_.empty() && std::chrono::steady_clock::now() - lastMove < kBusyAfterMove);
    }
    ::poll(fds.data(), fds.size(), busy ? kBusyPollMs : kIdlePollMs);
    uint64_t drained;
    while (::read(wake_, &drained, sizeof(drained)) > 0) {
    }
  }
}

}  // namespace weft::netplugin
