// Socket wrapper timeouts/cancellation, address parsing and interface choice.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "src/bootstrap/interfaces.h"
#include "tests/unit/bootstrap/test_util.h"

namespace weft::bootstrap::test {
namespace {

TEST(BootstrapSocketTest, ParsesAddresses) {
  EXPECT_EQ(SocketAddress::parse("127.0.0.1:80").toString(), "127.0.0.1:80");
  EXPECT_EQ(SocketAddress::parse("[::1]:65535").toString(), "[::1]:65535");
  EXPECT_EQ(SocketAddress::parse("localhost:7").port(), 7);
  EXPECT_EQ(SocketAddress::parse("[::1]:8").family(), AF_INET6);
  for (const char* bad : {"", "1.2.3.4", "1.2.3.4:", ":80", "1.2.3.4:65536", "1.2.3.4:8x", "::1:80",
                          "[::1]80", "[::1", "[]:80", "no.such.host.invalid:80"})
    EXPECT_EQ(errorOf([&] { SocketAddress::parse(bad); }).code, Status::kInvalidArgument) << bad;
}

TEST(BootstrapSocketTest, RecvTimesOutIsCancelledAndSeesClose) {
  Socket listener = Socket::listen(SocketAddress::parse("127.0.0.1:0"));
  Socket client = connectRaw(listener.localAddress());
  Socket server;
  for (int i = 0; i < 100 && !server.valid(); ++i) {
    server = listener.tryAccept(nullptr);
    if (!server.valid()) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(server.valid());
  char buf[4];
  auto start = std::chrono::steady_clock::now();
  Caught c = errorOf([&] { server.recvAll(buf, 4, Deadline(100ms), -1, "reading"); });
  EXPECT_EQ(c.code, Status::kSystemError);
  EXPECT_NE(c.message.find("timed out"), std::string::npos);
  EXPECT_LT(secondsSince(start), 2.0);

  EventFd cancel;
  cancel.signal();
  EXPECT_EQ(errorOf([&] { server.recvAll(buf, 4, Deadline(10s), cancel.fd(), "r"); }).code,
            Status::kInternalError);

  // Partial data then close: the reader reports the peer, not a timeout.
  writeRaw(client, "ab", 2);
  client.close();
  c = errorOf([&] { server.recvAll(buf, 4, Deadline(10s), -1, "reading"); });
  EXPECT_EQ(c.code, Status::kRemoteError);
  EXPECT_NE(c.message.find("closed"), std::string::npos);
}

TEST(BootstrapSocketTest, ConnectRefusedIsRemoteErrorOrTimeoutWhenRetrying) {
  SocketAddress nobody = SocketAddress::parse("127.0.0.1:" + std::to_string(freeLoopbackPort()));
  EXPECT_EQ(errorOf([&] { Socket::connect(nobody, Deadline(1s), -1, "c"); }).code,
            Status::kRemoteError);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf([&] { Socket::connect(nobody, Deadline(200ms), -1, "c", true); }).code,
            Status::kSystemError);
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(BootstrapSocketTest, SocketsAreCloseOnExec) {
  Socket s = Socket::listen(SocketAddress::parse("127.0.0.1:0"));
  EXPECT_TRUE(::fcntl(s.fd(), F_GETFD) & FD_CLOEXEC);
}

Interface iface(const char* name, const char* addr, bool loopback = false) {
  Interface i;
  i.name = name;
  i.address = SocketAddress::parse(addr);
  i.loopback = loopback;
  return i;
}

TEST(BootstrapInterfaceTest, FilterSyntax) {
  InterfaceFilter prefix("eth,ib");
  EXPECT_TRUE(prefix.matches("eth0"));
  EXPECT_TRUE(prefix.matches("ib1"));
  EXPECT_FALSE(prefix.matches("lo"));
  InterfaceFilter exclude("^docker,lo");
  EXPECT_FALSE(exclude.matches("docker0"));
  EXPECT_FALSE(exclude.matches("lo"));
  EXPECT_TRUE(exclude.matches("eth0"));
  InterfaceFilter exact("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));
  InterfaceFilter excludeExact("^=eth0");
  EXPECT_FALSE(excludeExact.matches("eth0"));
  EXPECT_TRUE(excludeExact.matches("eth01"));
}

TEST(BootstrapInterfaceTest, PicksByDefaultAndBySpec) {
  std::vector<Interface> ifs = {
      iface("lo", "127.0.0.1:0", true), iface("docker0", "172.17.0.1:0"),
      iface("ib0", "[fe80::1%3]:0"),    iface("ib0", "[fd00::5]:0"),
      iface("eth0", "192.0.2.2:0"),     iface("eth1", "198.51.100.7:0"),
  };
  EXPECT_EQ(pickAddress(ifs, "").toString(), "192.0.2.2:0");
  EXPECT_EQ(pickAddress(ifs, "eth1").toString(), "198.51.100.7:0");
  EXPECT_EQ(pickAddress(ifs, "^eth0,docker,lo,ib").toString(), "198.51.100.7:0");
  EXPECT_EQ(pickAddress(ifs, "=lo").toString(), "127.0.0.1:0");
  EXPECT_EQ(pickAddress(ifs, "docker").toString(), "172.17.0.1:0");
  EXPECT_EQ(pickAddress(ifs, "ib").toString(), "[fd00::5]:0");  // global before link-local
  EXPECT_EQ(errorOf([&] { pickAddress(ifs, "=eth"); }).code, Status::kInvalidArgument);

  std::vector<Interface> onlyLoopbackAndDocker = {iface("docker0", "172.17.0.1:0"),
                                                  iface("lo", "127.0.0.1:0", true)};
  EXPECT_EQ(pickAddress(onlyLoopbackAndDocker, "").toString(), "127.0.0.1:0");
  EXPECT_EQ(pickAddress({}, "").toString(), "127.0.0.1:0");
  std::vector<Interface> ipv6Only = {iface("eth0", "[fd00::2]:0")};
  EXPECT_EQ(pickAddress(ipv6Only, "").toString(), "127.0.0.1:0");
}

TEST(BootstrapInterfaceTest, HostChoiceIsListenable) {
  EXPECT_FALSE(listInterfaces().empty());
  SocketAddress a = chooseListenAddress("");
  Socket s = Socket::listen(a);
  EXPECT_NE(s.localAddress().port(), 0);
}

}  // namespace
}  // namespace weft::bootstrap::test
