// NCCL's network plugin ABI (ext-net), the versions Weft speaks: ncclNet_v11 (what NCCL 2.28
// loads first) and ncclNet_v10 (NCCL 2.24 to 2.27). A plugin is a shared library that exports a
// struct of function pointers under the symbol "ncclNetPlugin_vN"; a loader looks the symbols up
// newest first. The layouts are frozen per version: the static_asserts below pin every field
// the two sides exchange, so a change here that breaks the ABI fails to compile.
//
// The contract, as NCCL states it in its plugin documentation:
// - listen() fills an opaque handle of at most kNetHandleBytes that the caller carries to the
//   peer out of band; the peer's connect() on it gives a send comm, accept() here a recv comm.
//   connect() and accept() must not block: they return success with a null comm until the
//   connection is up, and are called again.
// - isend()/irecv() may return a null request when they cannot start now (try again later);
//   test() reports completion and, for a receive, the size that arrived (at most the size
//   posted). Messages on one comm match receives in the order both were posted.
// - regMr() registers memory of type NCCL_PTR_HOST (or CUDA/DMA-BUF where ptrSupport says so).
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Same numbering as nccl.h's ncclResult_t (an int in the ABI).
typedef int ncclNetResult_t;
enum {
  kNcclNetSuccess = 0,
  kNcclNetSystemError = 2,
  kNcclNetInternalError = 3,
  kNcclNetInvalidArgument = 4,
  kNcclNetInvalidUsage = 5,
  kNcclNetRemoteError = 6,
};

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4

// Log levels and subsystem bits of the logger callback NCCL hands to init().
typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;
#define NCCL_NET_LOG_SUBSYS_NET 0x10

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);
typedef ncclNetResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                                  int64_t pluginId, void* extData);

// Offload kind of a device: Weft only drives host devices.
typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;
typedef struct ncclNetDeviceHandle ncclNetDeviceHandle_t;  // opaque; Weft never asks for one

typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;
typedef ncclNetVDeviceProps_v11_t ncclNetVDeviceProps_v10_t;

typedef struct {
  int trafficClass;  // -1: undefined
} ncclNetCommConfig_t;

// Device properties; v11 appends maxMultiRequestSize to v10's.
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mbit/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;  // receives one irecv() may group
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;  // v11 only
} ncclNetProperties_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  ncclNetVDeviceProps_v10_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} ncclNetProperties_v10_t;

typedef struct {
  int32_t maxConcurrentPeers, minConcurrentPeers, maxFlowsPerPeer, minFlowsPerPeer;
} ncclNetCommAttr_v11_t;
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr, recvCommAttr;
  uint32_t op, algo, proto;
} ncclNetAttr_v11_t;

// v11: init() per communicator returns a context that listen/connect/finalize take.
typedef struct {
  const char* name;
  ncclNetResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_t* config,
                          ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclNetResult_t (*devices)(int* ndev);
  ncclNetResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  ncclNetResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclNetResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                             ncclNetDeviceHandle_t** sendDevComm);
  ncclNetResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclNetResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclNetResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, void** mhandle);
  ncclNetResult_t (*deregMr)(void* comm, void* mhandle);
  ncclNetResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request);
  ncclNetResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** phandles, void** request);
  ncclNetResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                            void** request);
  ncclNetResult_t (*test)(void* request, int* done, int* sizes);
  ncclNetResult_t (*closeSend)(void* sendComm);
  ncclNetResult_t (*closeRecv)(void* recvComm);
  ncclNetResult_t (*closeListen)(void* listenComm);
  ncclNetResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclNetResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclNetResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  ncclNetResult_t (*finalize)(void* ctx);
  ncclNetResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

// v10: one process-wide init(); the traffic class rides on connect().
typedef struct {
  const char* name;
  ncclNetResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  ncclNetResult_t (*devices)(int* ndev);
  ncclNetResult_t (*getProperties)(int dev, ncclNetProperties_v10_t* props);
  ncclNetResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclNetResult_t (*connect)(int dev, ncclNetCommConfig_t* config, void* handle, void** sendComm,
                             ncclNetDeviceHandle_t** sendDevComm);
  ncclNetResult_t (*accept)(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** recvDevComm);
  ncclNetResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclNetResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                 int fd, void** mhandle);
  ncclNetResult_t (*deregMr)(void* comm, void* mhandle);
  ncclNetResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request);
  ncclNetResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** phandles, void** request);
  ncclNetResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                            void** request);
  ncclNetResult_t (*test)(void* request, int* done, int* sizes);
  ncclNetResult_t (*closeSend)(void* sendComm);
  ncclNetResult_t (*closeRecv)(void* recvComm);
  ncclNetResult_t (*closeListen)(void* listenComm);
  ncclNetResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclNetResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclNetResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v10_t* props);
} ncclNet_v10_t;

#ifdef __cplusplus
}  // extern "C"

// The layouts on LP64 (x86-64, aarch64), as NCCL's headers lay them out.
static_assert(sizeof(void*) == 8, "the ABI checks below assume LP64");
static_assert(offsetof(ncclNetProperties_v11_t, guid) == 16);
static_assert(offsetof(ncclNetProperties_v11_t, ptrSupport) == 24);
static_assert(offsetof(ncclNetProperties_v11_t, latency) == 44);
static_assert(offsetof(ncclNetProperties_v11_t, maxRecvs) == 52);
static_assert(offsetof(ncclNetProperties_v11_t, netDeviceType) == 56);
static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64);
static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88);
static_assert(offsetof(ncclNetProperties_v11_t, maxCollBytes) == 96);
static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104);
static_assert(sizeof(ncclNetProperties_v11_t) == 112);
static_assert(sizeof(ncclNetProperties_v10_t) == 104);
static_assert(offsetof(ncclNet_v11_t, init) == 8);
static_assert(offsetof(ncclNet_v11_t, listen) == 32);
static_assert(offsetof(ncclNet_v11_t, regMr) == 56);
static_assert(offsetof(ncclNet_v11_t, isend) == 80);
static_assert(offsetof(ncclNet_v11_t, test) == 104);
static_assert(offsetof(ncclNet_v11_t, closeListen) == 128);
static_assert(offsetof(ncclNet_v11_t, makeVDevice) == 152);
static_assert(offsetof(ncclNet_v11_t, finalize) == 160);
static_assert(sizeof(ncclNet_v11_t) == 176);
static_assert(offsetof(ncclNet_v10_t, test) == 104);
static_assert(sizeof(ncclNet_v10_t) == 160);
static_assert(sizeof(ncclNetAttr_v11_t) == 44);
#endif
