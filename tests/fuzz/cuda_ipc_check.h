// The property for what a CUDA IPC peer reads from the bootstrap
// (transports/cuda/ipc_descriptor.h): any bytes either parse into a descriptor whose buffer lies
// inside its allocation, with the fields its kind needs, and encode back to the same bytes, or
// are refused with a reason.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "transports/cuda/ipc_descriptor.h"

namespace weft::fuzz {

[[noreturn]] inline void cudaIpcPropertyFailed(const char* what, std::string_view input) {
  std::fprintf(stderr, "CUDA IPC descriptor property violated: %s (input of %zu bytes)\n", what,
               input.size());
  std::abort();
}

// Returns whether the input was accepted.
inline bool checkCudaIpcInput(std::string_view input) {
  using namespace weft::transport::cuda;
  // A heap block of exactly the input's size, so a sanitizer reports any read past it.
  auto* copy = new std::byte[input.size() + 1];
  std::memcpy(copy, input.data(), input.size());
  IpcDescriptor d;
  std::string why;
  const bool ok = parseIpcDescriptor(std::span<const std::byte>(copy, input.size()), &d, &why);
  if (ok) {
    if (d.length == 0 || d.offset >= d.allocationBytes || d.length > d.allocationBytes - d.offset ||
        d.allocationBytes > kIpcMaxBytes)
      cudaIpcPropertyFailed("buffer outside its allocation", input);
    if (d.ownerPid <= 0) cudaIpcPropertyFailed("non-positive pid", input);
    const auto kind = static_cast<IpcKind>(d.kind);
    if (kind == IpcKind::kCuMemFd && (d.ownerFd < 0 || d.secret == 0))
      cudaIpcPropertyFailed("cuMem descriptor without fd or secret", input);
    if (kind == IpcKind::kLegacy && d.ownerFd != -1)
      cudaIpcPropertyFailed("legacy descriptor with an fd", input);
    if (kind != IpcKind::kCuMemFd && kind != IpcKind::kLegacy)
      cudaIpcPropertyFailed("unknown kind accepted", input);
    const IpcDescriptorBytes back = encodeIpcDescriptor(d);
    if (input.size() != back.size() || std::memcmp(back.data(), copy, back.size()) != 0)
      cudaIpcPropertyFailed("accepted bytes do not encode back", input);
  } else if (why.empty()) {
    cudaIpcPropertyFailed("refused without a reason", input);
  }
  delete[] copy;
  return ok;
}

}  // namespace weft::fuzz
