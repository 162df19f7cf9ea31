// Drives a network plugin through its C ABI the way NCCL does (nccl_net.h): the library opened
// with dlopen, comms built by listen/connect/accept polled until they exist, requests tested
// until done, every wait bounded.
#pragma once
#include <dlfcn.h>

#include <chrono>
#include <string>
#include <thread>

#include "transports/net_plugin/nccl_net.h"

namespace weft::test {

// The built libnccl-net-weft.so (set by CMake).
inline const char* weftPluginPath() { return WEFT_NET_PLUGIN_PATH; }

// The plugin's v11 table, initialised; null (and *why) on failure.
inline const ncclNet_v11_t* openWeftPlugin(void** ctx, std::string* why) {
  void* lib = dlopen(weftPluginPath(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return *why = dlerror(), nullptr;
  auto* net = static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  if (!net) return *why = "no ncclNetPlugin_v11", nullptr;
  ncclNetCommConfig_t config{-1};
  if (net->init(ctx, 1, &config, nullptr, nullptr) != kNcclNetSuccess)
    return *why = "init failed", nullptr;
  return net;
}

// Socket device: the plugin's last one.
inline int socketDevice(const ncclNet_v11_t* net) {
  int n = 0;
  net->devices(&n);
  return n - 1;
}

constexpr auto kWait = std::chrono::seconds(30);

// Polls `step` (returns true when done) until done or kWait; false on timeout or error.
template <class Step>
bool pollUntil(Step&& step) {
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (std::chrono::steady_clock::now() < deadline) {
    int r = step();
    if (r < 0) return false;
    if (r > 0) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return false;
}

inline bool connectComm(const ncclNet_v11_t* net, void* ctx, int dev, void* handle,
                        void** sendComm) {
  *sendComm = nullptr;
  return pollUntil([&] {
    if (net->connect(ctx, dev, handle, sendComm, nullptr) != kNcclNetSuccess) return -1;
    return *sendComm ? 1 : 0;
  });
}

inline bool acceptComm(const ncclNet_v11_t* net, void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  return pollUntil([&] {
    if (net->accept(listenComm, recvComm, nullptr) != kNcclNetSuccess) return -1;
    return *recvComm ? 1 : 0;
  });
}

// Tests `request` until done; the size it reports in *size. Returns the plugin's error, or
// kNcclNetInternalError at the timeout.
inline int waitRequest(const ncclNet_v11_t* net, void* request, int* size = nullptr) {
  int result = kNcclNetInternalError;
  pollUntil([&] {
    int done = 0, s = -1;
    int r = net->test(request, &done, &s);
    if (r != kNcclNetSuccess) return result = r, -1;
    if (done && size) *size = s;
    if (done) result = kNcclNetSuccess;
    return done ? 1 : 0;
  });
  return result;
}

// Tests a send and a receive by turns (the plugin moves a large message only as both sides
// call it) until both are done; the receive's size in *size.
inline int waitRequests(const ncclNet_v11_t* net, void* send, void* recv, int* size) {
  int result = kNcclNetInternalError;
  bool sendDone = false, recvDone = false;
  pollUntil([&] {
    int done = 0, s = -1;
    if (!sendDone) {
      if (int r = net->test(send, &done, nullptr); r != kNcclNetSuccess) return result = r, -1;
      sendDone = done != 0;
    }
    if (!recvDone) {
      if (int r = net->test(recv, &done, &s); r != kNcclNetSuccess) return result = r, -1;
      if (done) *size = s;
      recvDone = done != 0;
    }
    if (sendDone && recvDone) result = kNcclNetSuccess;
    return sendDone && recvDone ? 1 : 0;
  });
  return result;
}

}  // namespace weft::test
