// Raw TCP between two processes of this host, the bound a tcp collective between them can reach:
// one direction (like ../shared/peers' stream test) and both directions at once (what a 2-rank
// allreduce needs: N bytes each way). Blocking 1 MiB writes, TCP_NODELAY, one thread per
// direction.
//   tcp_pair_bench [GiB per direction, default 4]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

void full(int fd, char* p, size_t n, bool write) {
  while (n > 0) {
    ssize_t r = write ? ::write(fd, p, n) : ::read(fd, p, n);
    if (r <= 0) std::_Exit(1);
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void stream(int fd, size_t total, bool send) {
  const size_t chunk = 1 << 20;
  std::vector<char> buf(chunk, 1);
  for (size_t done = 0; done < total; done += chunk) full(fd, buf.data(), chunk, send);
}

// GB/s per direction.
double measure(size_t total, bool both) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(ls, 1);
  socklen_t len = sizeof a;
  ::getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  pid_t pid = ::fork();
  if (pid == 0) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::_Exit(1);
    int one = 1;
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread rx;
    if (both) rx = std::thread([&] { stream(s, total, false); });
    stream(s, total, true);
    if (both) rx.join();
    std::_Exit(0);
  }
  int s = ::accept(ls, nullptr, nullptr);
  int one = 1;
  ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto t0 = std::chrono::steady_clock::now();
  std::thread tx;
  if (both) tx = std::thread([&] { stream(s, total, true); });
  stream(s, total, false);
  if (both) tx.join();
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::waitpid(pid, nullptr, 0);
  ::close(s);
  ::close(ls);
  return total / sec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  size_t total = static_cast<size_t>((argc > 1 ? std::atof(argv[1]) : 4) * (1ull << 30));
  total = std::max<size_t>(total, 1 << 20) >> 20 << 20;
  std::printf("tcp loopback pair, one direction:   %6.2f GB/s\n", measure(total, false));
  std::printf("tcp loopback pair, both directions: %6.2f GB/s each way\n", measure(total, true));
  return 0;
}
