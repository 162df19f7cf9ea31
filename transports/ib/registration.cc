#include "transports/ib/registration.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace weft::ib {

MrCache& mrCacheOf(ibv_pd* pd) {
  // The process's protection domains are its devices' (devices.h): a handful, kept open.
  static std::mutex mu;
  static std::map<ibv_pd*, MrCache*> caches;
  std::lock_guard<std::mutex> lock(mu);
  MrCache*& c = caches[pd];
  if (!c) {
    const Verbs* v = verbs();
    MrOps ops;
    ops.reg = [v, pd](uintptr_t base, size_t bytes, std::string* why) {
      ibv_mr* mr = v->regMr(pd, reinterpret_cast<void*>(base), bytes, kUserAccess);
      if (!mr) {
        *why = "ibv_reg_mr of " + std::to_string(bytes) + " B failed: " + std::strerror(errno);
        return MrKeys{};
      }
      return MrKeys{mr, mr->lkey, mr->rkey};
    };
    ops.dereg = [v](void* handle) { v->deregMr(static_cast<ibv_mr*>(handle)); };
    c = new MrCache(std::move(ops), static_cast<size_t>(::sysconf(_SC_PAGESIZE)), 0);
  }
  return *c;
}

}  // namespace weft::ib
