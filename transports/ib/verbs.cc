#include "transports/ib/verbs.h"

#include <dlfcn.h>

#include <mutex>

namespace weft::ib {
namespace {

template <typename F>
bool bind(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  return *out != nullptr;
}

struct Loaded {
  Verbs v{};
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded l;
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    l.why = "libibverbs.so.1 not found";
    return l;
  }
  Verbs& v = l.v;
  l.ok = bind(h, "ibv_get_device_list", &v.getDeviceList) &&
         bind(h, "ibv_free_device_list", &v.freeDeviceList) &&
         bind(h, "ibv_get_device_name", &v.getDeviceName) &&
         bind(h, "ibv_open_device", &v.openDevice) && bind(h, "ibv_close_device", &v.closeDevice) &&
         bind(h, "ibv_query_device", &v.queryDevice) && bind(h, "ibv_query_port", &v.queryPort) &&
         bind(h, "ibv_query_gid", &v.queryGid) && bind(h, "ibv_alloc_pd", &v.allocPd) &&
         bind(h, "ibv_dealloc_pd", &v.deallocPd) && bind(h, "ibv_reg_mr", &v.regMr) &&
         bind(h, "ibv_dereg_mr", &v.deregMr) && bind(h, "ibv_create_cq", &v.createCq) &&
         bind(h, "ibv_destroy_cq", &v.destroyCq) && bind(h, "ibv_create_qp", &v.createQp) &&
         bind(h, "ibv_modify_qp", &v.modifyQp) && bind(h, "ibv_destroy_qp", &v.destroyQp) &&
         bind(h, "ibv_get_async_event", &v.getAsyncEvent) &&
         bind(h, "ibv_ack_async_event", &v.ackAsyncEvent) &&
         bind(h, "ibv_wc_status_str", &v.wcStatusStr) &&
         bind(h, "ibv_create_comp_channel", &v.createCompChannel) &&
         bind(h, "ibv_destroy_comp_channel", &v.destroyCompChannel) &&
         bind(h, "ibv_get_cq_event", &v.getCqEvent) &&
         bind(h, "ibv_ack_cq_events", &v.ackCqEvents) &&
         bind(h, "ibv_event_type_str", &v.eventTypeStr);
  if (!l.ok) l.why = "libibverbs lacks a verbs entry point";
  return l;
}

}  // namespace

const Verbs* verbs(std::string* why) {
  // Loaded once per process: the library, like the devices it opens, is the process's.
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.ok && why) *why = loaded.why;
  return loaded.ok ? &loaded.v : nullptr;
}

}  // namespace weft::ib
