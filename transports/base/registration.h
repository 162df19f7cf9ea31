// Buffers the user registers with a communicator (ncclCommRegister): a connection whose
// transport must register memory before it moves it (ibverbs) implements this interface, and
// the communicator registers each buffer with every such connection up front, and with
// connections made later. Found by dynamic_cast from the Connection; most transports need none.
#pragma once
#include <cstddef>
#include <string>

namespace weft::transport {

class MemoryRegistration {
 public:
  virtual ~MemoryRegistration() = default;
  // Registers [addr, addr + bytes) on behalf of `owner` (the communicator); false and *why
  // where it cannot be registered (the buffer still works, registered on first use or copied).
  virtual bool registerMemory(const void* owner, const void* addr, size_t bytes,
                              std::string* why) = 0;
  // Ends `owner`'s registration: no transfer starts from it after this returns, and it is
  // deregistered once the transfers posted from it complete.
  virtual void deregisterMemory(const void* owner, const void* addr, size_t bytes) = 0;
};

}  // namespace weft::transport
