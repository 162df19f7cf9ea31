// A fake CUDA driver for host tests of the cuMem, IPC and registration code: "device memory" is
// memfd-backed host memory, so an allocation exported as an fd and mapped again (in this process
// or a forked one) really shares its bytes, and the tests check data through both mappings.
// Function pointers cannot capture, so the fake keeps its state in one global; reset() it in
// each test's SetUp.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <vector>

#include "src/cuda/driver_api.h"

namespace weft::cuda::fake {

struct Allocation {
  int fd = -1;  // the memfd behind a cuMem handle
  size_t bytes = 0;
};

struct Mapped {
  size_t bytes = 0;
  CuMemHandle handle = 0;  // 0: cuMemAlloc memory (plain)
  int device = 0;
  unsigned long long bufferId = 0;
};

struct State {
  bool contextCurrent = true;
  int currentDevice = 0;
  int devices = 2;
  bool vmm = true;
  bool posixFd = true;
  size_t granularity = 64 << 10;
  std::vector<std::vector<int>> canAccess;  // [device][peer]
  CuResult failCreate = kCuSuccess;         // cuMemCreate's result
  CuResult failSetAccess = kCuSuccess;
  std::map<CuMemHandle, Allocation> handles;
  std::map<CuDevicePtr, size_t> reserved;
  std::map<CuDevicePtr, Mapped> mapped;  // base -> mapping
  std::vector<CuMemAccessDesc> lastAccess;
  CuMemAllocationProp lastProp;
  CuMemHandle nextHandle = 1;
  unsigned long long nextBufferId = 100;
  int unmaps = 0, releases = 0, ipcCloses = 0;
};

inline State& state() {
  static State s;
  return s;
}

inline void reset() { state() = State{}; }

inline void* ptr(CuDevicePtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

inline const Mapped* find(CuDevicePtr p, CuDevicePtr* base) {
  auto& m = state().mapped;
  auto it = m.upper_bound(p);
  if (it == m.begin()) return nullptr;
  --it;
  if (p - it->first >= it->second.bytes) return nullptr;
  *base = it->first;
  return &it->second;
}

inline CuResult driverGetVersion(int* v) { return *v = 13000, kCuSuccess; }
inline CuResult deviceGetCount(int* n) { return *n = state().devices, kCuSuccess; }
inline CuResult pointerGetAttribute(void* data, int attribute, unsigned long long p) {
  CuDevicePtr base = 0;
  const Mapped* m = find(p, &base);
  if (!m) return kCuErrorInvalidValue;
  switch (attribute) {
    case kCuPointerAttributeMemoryType:
      return *static_cast<unsigned*>(data) = kCuMemoryTypeDevice, kCuSuccess;
    case kCuPointerAttributeDeviceOrdinal:
      return *static_cast<int*>(data) = m->device, kCuSuccess;
    case kCuPointerAttributeIsManaged:
      return *static_cast<unsigned*>(data) = 0, kCuSuccess;
    case kCuPointerAttributeBufferId:
      return *static_cast<unsigned long long*>(data) = m->bufferId, kCuSuccess;
  }
  return kCuErrorInvalidValue;
}
inline CuResult deviceGet(CuDevice* d, int ordinal) {
  return ordinal < state().devices ? (*d = ordinal, kCuSuccess) : kCuErrorInvalidDevice;
}
inline CuResult deviceGetAttribute(int* v, int attribute, CuDevice) {
  *v = attribute == kCuDeviceAttributeVmmSupported       ? state().vmm
       : attribute == kCuDeviceAttributePosixFdSupported ? state().posixFd
                                                         : 0;
  return kCuSuccess;
}
inline CuResult deviceCanAccessPeer(int* can, CuDevice d, CuDevice peer) {
  const auto& m = state().canAccess;
  *can = d < static_cast<int>(m.size()) && peer < static_cast<int>(m[d].size()) ? m[d][peer] : 0;
  return kCuSuccess;
}
inline CuResult ctxGetCurrent(CuContext* c) {
  *c = state().contextCurrent ? reinterpret_cast<CuContext>(0x1000) : nullptr;
  return kCuSuccess;
}
inline CuResult ctxGetDevice(CuDevice* d) {
  return state().contextCurrent ? (*d = state().currentDevice, kCuSuccess) : kCuErrorInvalidContext;
}
inline CuResult memGetAllocationGranularity(size_t* g, const CuMemAllocationProp*, int) {
  return *g = state().granularity, kCuSuccess;
}
inline CuResult memCreate(CuMemHandle* h, size_t bytes, const CuMemAllocationProp* prop,
                          unsigned long long) {
  state().lastProp = *prop;
  if (state().failCreate != kCuSuccess) return state().failCreate;
  if (bytes % state().granularity) return kCuErrorInvalidValue;
  const int fd = memfd_create("fake-cumem", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return kCuErrorOutOfMemory;
  *h = state().nextHandle++;
  state().handles[*h] = {fd, bytes};
  return kCuSuccess;
}
inline CuResult memRelease(CuMemHandle h) {
  auto it = state().handles.find(h);
  if (it == state().handles.end()) return kCuErrorInvalidValue;
  close(it->second.fd);
  state().handles.erase(it);
  ++state().releases;
  return kCuSuccess;
}
inline CuResult memAddressReserve(CuDevicePtr* p, size_t bytes, size_t, CuDevicePtr,
                                  unsigned long long) {
  void* va = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (va == MAP_FAILED) return kCuErrorOutOfMemory;
  *p = reinterpret_cast<uintptr_t>(va);
  state().reserved[*p] = bytes;
  return kCuSuccess;
}
inline CuResult memAddressFree(CuDevicePtr p, size_t bytes) {
  if (state().reserved.erase(p) == 0) return kCuErrorInvalidValue;
  munmap(ptr(p), bytes);
  return kCuSuccess;
}
inline CuResult memMap(CuDevicePtr p, size_t bytes, size_t offset, CuMemHandle h,
                       unsigned long long) {
  auto it = state().handles.find(h);
  if (it == state().handles.end() || offset + bytes > it->second.bytes) return kCuErrorInvalidValue;
  if (mmap(ptr(p), bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, it->second.fd,
           static_cast<off_t>(offset)) == MAP_FAILED)
    return kCuErrorOutOfMemory;
  state().mapped[p] = {bytes, h, state().currentDevice, state().nextBufferId++};
  return kCuSuccess;
}
inline CuResult memUnmap(CuDevicePtr p, size_t bytes) {
  if (state().mapped.erase(p) == 0) return kCuErrorInvalidValue;
  mmap(ptr(p), bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ++state().unmaps;
  return kCuSuccess;
}
inline CuResult memSetAccess(CuDevicePtr, size_t, const CuMemAccessDesc* d, size_t n) {
  state().lastAccess.assign(d, d + n);
  return state().failSetAccess;
}
inline CuResult memExportToShareableHandle(void* out, CuMemHandle h, int type, unsigned long long) {
  auto it = state().handles.find(h);
  if (it == state().handles.end() || type != kCuMemHandleTypePosixFd) return kCuErrorInvalidValue;
  *static_cast<int*>(out) = dup(it->second.fd);
  return kCuSuccess;
}
inline CuResult memImportFromShareableHandle(CuMemHandle* h, void* os, int type) {
  const int fd = static_cast<int>(reinterpret_cast<uintptr_t>(os));
  if (type != kCuMemHandleTypePosixFd) return kCuErrorInvalidValue;
  const off_t bytes = lseek(fd, 0, SEEK_END);
  if (bytes <= 0) return kCuErrorInvalidValue;
  *h = state().nextHandle++;
  state().handles[*h] = {dup(fd), static_cast<size_t>(bytes)};
  return kCuSuccess;
}
inline CuResult memAlloc(CuDevicePtr* p, size_t bytes) {
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return kCuErrorOutOfMemory;
  *p = reinterpret_cast<uintptr_t>(m);
  state().mapped[*p] = {bytes, 0, state().currentDevice, state().nextBufferId++};
  return kCuSuccess;
}
inline CuResult memFree(CuDevicePtr p) {
  auto it = state().mapped.find(p);
  if (it == state().mapped.end()) return kCuErrorInvalidValue;
  munmap(ptr(p), it->second.bytes);
  state().mapped.erase(it);
  return kCuSuccess;
}
inline CuResult memGetAddressRange(CuDevicePtr* base, size_t* bytes, CuDevicePtr p) {
  const Mapped* m = find(p, base);
  if (!m) return kCuErrorNotFound;
  *bytes = m->bytes;
  return kCuSuccess;
}
inline CuResult ipcGetMemHandle(CuIpcMemHandle* h, CuDevicePtr p) {
  CuDevicePtr base = 0;
  const Mapped* m = find(p, &base);
  if (!m || base != p) return kCuErrorInvalidValue;
  std::memset(h->reserved, 0, sizeof h->reserved);
  std::memcpy(h->reserved, &m->bufferId, sizeof m->bufferId);
  return kCuSuccess;
}
inline CuResult ipcOpenMemHandle(CuDevicePtr* p, CuIpcMemHandle h, unsigned) {
  unsigned long long id = 0;
  std::memcpy(&id, h.reserved, sizeof id);
  for (const auto& [base, m] : state().mapped)
    if (m.bufferId == id) return *p = base, kCuSuccess;  // one process: the same memory
  return kCuErrorInvalidHandle;
}
inline CuResult ipcCloseMemHandle(CuDevicePtr) { return ++state().ipcCloses, kCuSuccess; }

// A table with every entry point the code under test uses.
inline DriverApi table() {
  DriverApi a;
  a.driverGetVersion = driverGetVersion;
  a.deviceGetCount = deviceGetCount;
  a.pointerGetAttribute = pointerGetAttribute;
  a.deviceGet = deviceGet;
  a.deviceGetAttribute = deviceGetAttribute;
  a.deviceCanAccessPeer = deviceCanAccessPeer;
  a.ctxGetCurrent = ctxGetCurrent;
  a.ctxGetDevice = ctxGetDevice;
  a.memGetAllocationGranularity = memGetAllocationGranularity;
  a.memCreate = memCreate;
  a.memRelease = memRelease;
  a.memAddressReserve = memAddressReserve;
  a.memAddressFree = memAddressFree;
  a.memMap = memMap;
  a.memUnmap = memUnmap;
  a.memSetAccess = memSetAccess;
  a.memExportToShareableHandle = memExportToShareableHandle;
  a.memImportFromShareableHandle = memImportFromShareableHandle;
  a.memAlloc = memAlloc;
  a.memFree = memFree;
  a.memGetAddressRange = memGetAddressRange;
  a.ipcGetMemHandle = ipcGetMemHandle;
  a.ipcOpenMemHandle = ipcOpenMemHandle;
  a.ipcCloseMemHandle = ipcCloseMemHandle;
  return a;
}

}  // namespace weft::cuda::fake
