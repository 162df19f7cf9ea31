#include "tests/unit/bootstrap/test_util.h"

#include <arpa/inet.h>

#include <cstdlib>

namespace weft::bootstrap::test {
namespace {

// Later-call waits use WEFT_TIMEOUT_MS as Bootstrap::create reads it: keep it short in tests so
// a bug fails the test instead of hanging it.
struct ShortDefaultTimeout {
  ShortDefaultTimeout() { ::setenv("WEFT_TIMEOUT_MS", "20000", /*overwrite=*/0); }
} shortDefaultTimeout;

}  // namespace

void runRanks(int nranks, const std::function<void(int)>& fn) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

std::vector<std::unique_ptr<Bootstrap>> createAll(const UniqueIdBytes& id, int nranks,
                                                  std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<Bootstrap>> out(static_cast<size_t>(nranks));
  runRanks(nranks, [&](int r) {
    out[r] = Bootstrap::create(id, r, nranks, timeout, Tuning::fromEnvironment().timeout);
  });
  return out;
}

TcpBootstrap& tcp(Bootstrap& b) { return dynamic_cast<TcpBootstrap&>(b); }

Caught errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return Caught{e.code(), e.what()};
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
    return Caught{Status::kInternalError, e.what()};
  }
  ADD_FAILURE() << "expected a weft::Error";
  return Caught{};
}

Socket connectRaw(const SocketAddress& addr) {
  return Socket::connect(addr, Deadline(5s), -1, "test stranger");
}

void writeRaw(const Socket& s, const void* data, size_t bytes) {
  try {
    s.sendAll(data, bytes, Deadline(5s), -1, "test stranger");
  } catch (const Error&) {
  }
}

uint16_t freeLoopbackPort() {
  Socket s = Socket::listen(SocketAddress::parse("127.0.0.1:0"));
  return s.localAddress().port();
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace weft::bootstrap::test
