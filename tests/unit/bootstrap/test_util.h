// Helpers shared by the bootstrap tests: ranks as threads, error capture, raw sockets. The tests
// live in this namespace, so they name the helpers and the chrono literals unqualified.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/tcp_bootstrap.h"
#include "src/common/error.h"

namespace weft::bootstrap::test {

using namespace std::chrono_literals;

// Runs fn(rank) for every rank on its own thread and rethrows the first exception.
void runRanks(int nranks, const std::function<void(int)>& fn);

// Joins all ranks of `id` concurrently.
std::vector<std::unique_ptr<Bootstrap>> createAll(const UniqueIdBytes& id, int nranks,
                                                  std::chrono::milliseconds timeout = 10s);

TcpBootstrap& tcp(Bootstrap& b);

// The weft::Error that fn throws; fails the test when it throws nothing or something else.
struct Caught {
  Status code = Status::kSuccess;
  std::string message;
};
Caught errorOf(const std::function<void()>& fn);

// A plain TCP connection to `addr` (for playing strangers).
Socket connectRaw(const SocketAddress& addr);
// Writes all bytes, ignoring a peer that already closed.
void writeRaw(const Socket& s, const void* data, size_t bytes);

// A loopback port that nobody listens on (bound and released).
uint16_t freeLoopbackPort();

double secondsSince(std::chrono::steady_clock::time_point start);

}  // namespace weft::bootstrap::test
