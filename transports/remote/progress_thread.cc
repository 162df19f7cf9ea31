#include "transports/remote/progress_thread.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "src/common/error.h"

namespace weft::remote {

ProgressThread::ProgressThread(const char* transport, ProgressPacing pacing)
    : transport_(transport), pacing_(pacing) {
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0)
    weft::fail(Status::kSystemError,
               std::string(transport_) + ": eventfd: " + std::string(std::strerror(errno)));
}

void ProgressThread::start() {
  thread_ = std::thread([this] { loop(); });
  thread_.detach();
}

void ProgressThread::add(ProgressClient* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    clients_.push_back(c);
    onAdd(c);
  }
  wake();
}

void ProgressThread::remove(ProgressClient* c) {
  std::lock_guard<std::mutex> lock(mu_);
  clients_.erase(std::remove(clients_.begin(), clients_.end(), c), clients_.end());
}

void ProgressThread::wake() {
  uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof(one));
}

void ProgressThread::loop() {
  std::vector<pollfd> fds;
  std::vector<int> clientFds;
  auto lastMove = std::chrono::steady_clock::now() - pacing_.busyAfterMove;
  for (;;) {
    fds.clear();
    fds.push_back({wake_, POLLIN, 0});
    size_t own = 0;
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      watchOwnFds(&fds);
      own = fds.size() - 1;
      for (ProgressClient* c : clients_) {
        busy = c->busy() || busy;
        clientFds.clear();
        c->watchedFds(&clientFds);
        for (int fd : clientFds) fds.push_back({fd, POLLIN, 0});
      }
      busy = busy || (!clients_.empty() &&
                      std::chrono::steady_clock::now() - lastMove < pacing_.busyAfterMove);
    }
    const auto sleep = busy ? pacing_.busyPoll : pacing_.idlePoll;
    ::poll(fds.data(), fds.size(), static_cast<int>(sleep.count()));
    uint64_t count = 0;
    while (::read(wake_, &count, sizeof(count)) > 0) {
    }
    if (held_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    onOwnFds(fds.data() + 1, own);
    for (ProgressClient* c : clients_)
      if (c->backgroundPass()) lastMove = std::chrono::steady_clock::now();
  }
}

}  // namespace weft::remote
