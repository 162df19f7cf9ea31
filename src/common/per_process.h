// One object of a type per process: made at the first call in the process, and made anew in a
// forked child, which has the parent's memory but not its threads (the parent's object is left as
// it is: its lock may be held by a thread the child does not have). Never destroyed, since its
// users may outlive static destructors. Progress threads of the transports live this way.
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace weft {

// T's default constructor may be private if T befriends this function.
template <class T>
T& perProcess() {
  static std::atomic<T*> current{nullptr};
  static std::atomic<pid_t> owner{0};
  static std::mutex mu;
  const pid_t me = ::getpid();
  // The owner first: once it names this process, the object stored before it is this process's.
  if (owner.load(std::memory_order_acquire) == me) return *current.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(mu);
  if (owner.load(std::memory_order_acquire) != me) {
    current.store(new T(), std::memory_order_release);
    owner.store(me, std::memory_order_release);
  }
  return *current.load(std::memory_order_acquire);
}

}  // namespace weft
