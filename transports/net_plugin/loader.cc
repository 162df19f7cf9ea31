#include "transports/net_plugin/loader.h"

#include <dlfcn.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "src/common/log.h"

namespace weft::netplugin {
namespace {

// The logger handed to the plugin: its messages go to Weft's log under NET.
void pluginLog(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt,
               ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT)
    WEFT_WARN(NET, "net plugin (%s:%d): %s", file ? file : "?", line, text);
  else if (level == NCCL_LOG_TRACE)
    WEFT_TRACE(NET, "net plugin (%s:%d): %s", file ? file : "?", line, text);
  else
    WEFT_INFO(NET, "net plugin (%s:%d): %s", file ? file : "?", line, text);
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

bool isNone(const std::string& s) {
  std::string t = trim(s);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t.empty() || t == "none";
}

}  // namespace

const char* resultName(ncclNetResult_t r) {
  switch (r) {
    case kNcclNetSuccess:
      return "success";
    case kNcclNetSystemError:
      return "system error";
    case kNcclNetInternalError:
      return "internal error";
    case kNcclNetInvalidArgument:
      return "invalid argument";
    case kNcclNetInvalidUsage:
      return "invalid usage";
    case kNcclNetRemoteError:
      return "remote error";
    default:
      return "unknown error";
  }
}

NetPlugin::~NetPlugin() {
  if (v11_ && ctx_ && v11_->finalize) v11_->finalize(ctx_);
  // The library stays mapped: comms a plugin made may be closed from its own threads late.
}

bool NetPlugin::open(const std::string& file, std::string* why) {
  dlerror();
  void* lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    *why = file + ": " + (e ? e : "dlopen failed");
    return false;
  }
  auto* v11 = static_cast<const ncclNet_v11_t*>(::dlsym(lib, "ncclNetPlugin_v11"));
  auto* v10 = v11 ? nullptr : static_cast<const ncclNet_v10_t*>(::dlsym(lib, "ncclNetPlugin_v10"));
  if (!v11 && !v10) {
    *why = file + ": exports neither ncclNetPlugin_v11 nor ncclNetPlugin_v10 (Weft speaks those)";
    ::dlclose(lib);
    return false;
  }
  // Every entry Weft calls must be there.
  auto missing = [&](const auto* n) -> const char* {
    if (!n->init) return "init";
    if (!n->devices) return "devices";
    if (!n->listen) return "listen";
    if (!n->connect) return "connect";
    if (!n->accept) return "accept";
    if (!n->regMr) return "regMr";
    if (!n->deregMr) return "deregMr";
    if (!n->isend) return "isend";
    if (!n->irecv) return "irecv";
    if (!n->test) return "test";
    if (!n->closeSend || !n->closeRecv || !n->closeListen) return "close";
    return nullptr;
  };
  const char* hole = v11 ? missing(v11) : missing(v10);
  if (hole) {
    *why = file + ": its ncclNet has no " + std::string(hole) + " function";
    ::dlclose(lib);
    return false;
  }
  ncclNetResult_t r;
  if (v11) {
    ncclNetCommConfig_t config{-1};
    r = v11->init(&ctx_, 0, &config, pluginLog, nullptr);
  } else {
    r = v10->init(pluginLog, nullptr);
  }
  const char* pluginName = v11 ? v11->name : v10->name;
  if (r != kNcclNetSuccess) {
    *why = file + ": init() of plugin " + (pluginName ? pluginName : "?") + " failed (" +
           resultName(r) + ")";
    ctx_ = nullptr;
    ::dlclose(lib);
    return false;
  }
  int ndev = 0;
  r = v11 ? v11->devices(&ndev) : v10->devices(&ndev);
  if (r != kNcclNetSuccess || ndev <= 0) {
    *why = file + ": plugin " + (pluginName ? pluginName : "?") + " reports no device";
    if (v11 && v11->finalize) v11->finalize(ctx_);
    ctx_ = nullptr;
    ::dlclose(lib);
    return false;
  }
  lib_ = lib;
  v11_ = v11;
  v10_ = v10;
  version_ = v11 ? 11 : 10;
  devices_ = ndev;
  name_ = pluginName ? pluginName : file;
  path_ = file;
  return true;
}

std::unique_ptr<NetPlugin> NetPlugin::load(const std::string& spec, std::string* why) {
  std::vector<std::string> tried;
  std::stringstream list(spec);
  std::string item;
  while (std::getline(list, item, ',')) {
    item = trim(item);
    if (isNone(item)) continue;
    std::vector<std::string> files;
    if (item.find('/') == std::string::npos) files.push_back("libnccl-net-" + item + ".so");
    files.push_back(item);
    for (const std::string& f : files) {
      std::unique_ptr<NetPlugin> p(new NetPlugin);
      std::string reason;
      if (p->open(f, &reason)) return p;
      tried.push_back(reason);
    }
  }
  why->clear();
  for (const std::string& t : tried) *why += (why->empty() ? "" : "; ") + t;
  if (why->empty()) *why = "no plugin named";
  return nullptr;
}

NetPlugin* pluginFor(const std::string& spec) {
  if (isNone(spec)) return nullptr;
  // Loaded libraries are process state (as in NCCL): one per spec, never unloaded.
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<NetPlugin>>* loaded =
      new std::map<std::string, std::unique_ptr<NetPlugin>>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(spec);
  if (it != loaded->end()) return it->second.get();
  std::string why;
  std::unique_ptr<NetPlugin> p = NetPlugin::load(spec, &why);
  if (p) {
    WEFT_INFO(NET, "net plugin %s (ncclNet v%d, %d devices) loaded from %s", p->name().c_str(),
              p->version(), p->devices(), p->path().c_str());
  } else {
    WEFT_WARN(NET, "NCCL_NET_PLUGIN=%s: no usable network plugin (%s); using Weft's own transports",
              spec.c_str(), why.c_str());
  }
  return (*loaded)[spec] = std::move(p), (*loaded)[spec].get();
}

#define WEFT_NET_CALL(expr) (v11_ ? v11_->expr : v10_->expr)

ncclNetResult_t NetPlugin::listen(int dev, void* handle, void** listenComm) {
  return v11_ ? v11_->listen(ctx_, dev, handle, listenComm) : v10_->listen(dev, handle, listenComm);
}
ncclNetResult_t NetPlugin::connect(int dev, void* handle, void** sendComm) {
  ncclNetDeviceHandle_t* devComm = nullptr;
  if (v11_) return v11_->connect(ctx_, dev, handle, sendComm, &devComm);
  ncclNetCommConfig_t config{-1};
  return v10_->connect(dev, &config, handle, sendComm, &devComm);
}
ncclNetResult_t NetPlugin::accept(void* listenComm, void** recvComm) {
  ncclNetDeviceHandle_t* devComm = nullptr;
  return WEFT_NET_CALL(accept(listenComm, recvComm, &devComm));
}
ncclNetResult_t NetPlugin::regMr(void* comm, void* data, size_t size, void** mhandle) {
  return WEFT_NET_CALL(regMr(comm, data, size, NCCL_PTR_HOST, mhandle));
}
ncclNetResult_t NetPlugin::deregMr(void* comm, void* mhandle) {
  return WEFT_NET_CALL(deregMr(comm, mhandle));
}
ncclNetResult_t NetPlugin::isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  return WEFT_NET_CALL(isend(sendComm, data, size, tag, mhandle, nullptr, request));
}
ncclNetResult_t NetPlugin::irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  void* datas[1] = {data};
  size_t sizes[1] = {size};
  int tags[1] = {tag};
  void* mhandles[1] = {mhandle};
  void* phandles[1] = {nullptr};
  return WEFT_NET_CALL(irecv(recvComm, 1, datas, sizes, tags, mhandles, phandles, request));
}
ncclNetResult_t NetPlugin::test(void* request, int* done, int* size) {
  return WEFT_NET_CALL(test(request, done, size));
}
ncclNetResult_t NetPlugin::closeSend(void* comm) { return WEFT_NET_CALL(closeSend(comm)); }
ncclNetResult_t NetPlugin::closeRecv(void* comm) { return WEFT_NET_CALL(closeRecv(comm)); }
ncclNetResult_t NetPlugin::closeListen(void* comm) { return WEFT_NET_CALL(closeListen(comm)); }

#undef WEFT_NET_CALL

}  // namespace weft::netplugin
