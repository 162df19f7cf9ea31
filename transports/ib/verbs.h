// libibverbs, loaded with dlopen (never linked): one binary runs where it is absent. The types
// come from <infiniband/verbs.h> (libibverbs-dev at build time); the data path calls
// (ibv_post_send, ibv_post_recv, ibv_poll_cq,
// ibv_req_notify_cq) are inline functions of that header that jump
// through the device context, so only the setup calls below are looked up by name.
#pragma once
#include <infiniband/verbs.h>

#include <string>

namespace weft::ib {

struct Verbs {
  ibv_device** (*getDeviceList)(int*);
  void (*freeDeviceList)(ibv_device**);
  const char* (*getDeviceName)(ibv_device*);
  ibv_context* (*openDevice)(ibv_device*);
  int (*closeDevice)(ibv_context*);
  int (*queryDevice)(ibv_context*, ibv_device_attr*);
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*);
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*allocPd)(ibv_context*);
  int (*deallocPd)(ibv_pd*);
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int);
  int (*deregMr)(ibv_mr*);
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroyCq)(ibv_cq*);
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*);
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int);
  int (*destroyQp)(ibv_qp*);
  int (*getAsyncEvent)(ibv_context*, ibv_async_event*);
  void (*ackAsyncEvent)(ibv_async_event*);
  const char* (*wcStatusStr)(ibv_wc_status);
  ibv_comp_channel* (*createCompChannel)(ibv_context*);
  int (*destroyCompChannel)(ibv_comp_channel*);
  int (*getCqEvent)(ibv_comp_channel*, ibv_cq**, void**);
  void (*ackCqEvents)(ibv_cq*, unsigned int);
  const char* (*eventTypeStr)(ibv_event_type);
};

// The process's libibverbs, or nullptr (and *why) when it cannot be loaded.
const Verbs* verbs(std::string* why = nullptr);

}  // namespace weft::ib
