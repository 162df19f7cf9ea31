// Helpers shared by memory-based transports: the two-direction FIFO layout of a rank pair.
#pragma once
#include <memory>
#include <string>

#include "transports/base/transport.h"
#include "transports/shm/fifo.h"

namespace weft::transport {

// Bytes of a pair block: direction lo->hi, then hi->lo.
size_t pairBytes(const ConnectContext& ctx);
void pairInit(void* mem, const ConnectContext& ctx);
// Name of the pair block for (rank, peer, channel), equal on both sides.
std::string pairName(const ConnectContext& ctx, int peer, int channel);

// Builds this side's FifoConnection over a pair block at `mem`.
std::unique_ptr<Connection> pairConnection(const ConnectContext& ctx, int peer, void* mem,
                                           const char* name, std::shared_ptr<void> keepAlive,
                                           std::function<Status(std::string*)> health,
                                           RemoteMode remote);

}  // namespace weft::transport
