// Loading an external network plugin the way NCCL does (NCCL_NET_PLUGIN): for each name of the
// comma-separated list, libnccl-net-<name>.so is tried, then the name as given (a file name or
// path); "none" loads nothing. The library's newest ncclNet symbol that Weft speaks is used
// (ncclNetPlugin_v11, then _v10; nccl_net.h), its init() is called once per process with a
// logger that writes to Weft's log (v11's per-communicator context is one context for the
// process here, commId 0: Weft's connections do not outlive the process's use of the plugin),
// and it must report at least one device. Weft uses device 0. Any failure is one
// clear warning and no plugin: Weft then uses its own transports.
//
// A NetPlugin hides the version: its methods take the arguments every version has.
#pragma once
#include <memory>
#include <string>

#include "transports/net_plugin/nccl_net.h"

namespace weft::netplugin {

class NetPlugin {
 public:
  ~NetPlugin();
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  // Loads and initialises the first usable library of `spec`; null and *why where none is.
  static std::unique_ptr<NetPlugin> load(const std::string& spec, std::string* why);

  const std::string& name() const { return name_; }  // the plugin's own name ("Weft", "IB"...)
  const std::string& path() const { return path_; }  // the library it came from
  int version() const { return version_; }
  int devices() const { return devices_; }

  ncclNetResult_t listen(int dev, void* handle, void** listenComm);
  ncclNetResult_t connect(int dev, void* handle, void** sendComm);
  ncclNetResult_t accept(void* listenComm, void** recvComm);
  ncclNetResult_t regMr(void* comm, void* data, size_t size, void** mhandle);  // host memory
  ncclNetResult_t deregMr(void* comm, void* mhandle);
  ncclNetResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclNetResult_t irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclNetResult_t test(void* request, int* done, int* size);
  ncclNetResult_t closeSend(void* comm);
  ncclNetResult_t closeRecv(void* comm);
  ncclNetResult_t closeListen(void* comm);

 private:
  NetPlugin() = default;
  bool open(const std::string& file, std::string* why);

  void* lib_ = nullptr;
  const ncclNet_v11_t* v11_ = nullptr;
  const ncclNet_v10_t* v10_ = nullptr;
  void* ctx_ = nullptr;  // v11's init() context
  std::string name_, path_;
  int version_ = 0;
  int devices_ = 0;
};

// The process's plugin for `spec` (Tuning::netPlugin): loaded on first use and kept for the life
// of the process, as NCCL keeps it; null where spec is empty or "none", or loading failed (a
// failure warns once per spec).
NetPlugin* pluginFor(const std::string& spec);

// The text an ncclNetResult_t stands for.
const char* resultName(ncclNetResult_t r);

}  // namespace weft::netplugin
