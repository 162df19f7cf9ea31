// The root side of the rendezvous: a background thread that collects one hello per rank (each
// starting with the id's secret), then sends every rank the table of all ranks' listen addresses.
// Strangers, wrong secrets, silent or malformed connections are dropped and logged without
// delaying the real ranks: all connections are served concurrently with non-blocking reads.
#pragma once
#include <chrono>
#include <cstddef>

#include "src/bootstrap/secret.h"
#include "src/bootstrap/socket.h"

namespace weft::bootstrap {

// How long any connection may take to present its complete hello.
inline constexpr std::chrono::milliseconds kHandshakeTimeout{5000};

// Serves one rendezvous on the bound, listening `listen` socket in a thread owned by a
// process-wide registry. The thread exits once every rank has its table, or after `timeout`
// (telling the ranks that arrived), or at process exit.
void startRoot(Socket listen, const Secret& secret, std::chrono::milliseconds timeout);

// Root threads of this process that are still running (for tests and diagnostics).
size_t liveRootCount();

}  // namespace weft::bootstrap
