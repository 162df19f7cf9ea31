// weftrun: starts N local processes of one program with the environment a Weft job reads
// (WEFT_RANK, WEFT_WORLD_SIZE, WEFT_ID_FILE, torchrun's RANK/WORLD_SIZE/MASTER_*, ...), forwards
// SIGINT/SIGTERM to them, and stops them all when one fails.
//
//   weftrun -n N [--tag-output | --separate-output DIR] [--timeout SEC] prog args...
//   weftrun [-n N] -H host1:slots,host2:slots [--netns] ... prog args...
//
// -H places ranks on hosts in order, filling each host's slots. Only this machine can be a host
// ("localhost" or its name), unless --netns makes every host a network namespace of this machine
// (ip netns add NAME; see tests/netns/netns.sh): each rank then runs inside its host's namespace
// with WEFT_HOST_ID=host, so the ranks of different hosts talk tcp like separate machines.
//
// Exit status: 0 when every process exits 0, else the first failure's status (128 + signal for
// a process killed by a signal, 124 for --timeout, 127 when prog cannot be run).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t gSignal = 0;

void onSignal(int sig) { gSignal = sig; }

enum class Output { kPassThrough, kTag, kSeparate };

struct Host {
  std::string name;
  int slots = 1;
};

struct Options {
  int n = 0;
  std::vector<Host> hosts;  // -H; empty: every rank on this host
  bool netns = false;
  Output output = Output::kPassThrough;
  std::string dir;  // --separate-output
  double timeout = 0;
  int progIndex = -1;
};

struct Stream {
  int fd = -1;
  int target = STDOUT_FILENO;
  std::string pending;  // a partial line
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
};

void usage(FILE* f) {
  std::fprintf(f,
               "usage: weftrun -n N [--tag-output | --separate-output DIR] [--timeout SEC] "
               "prog [args...]\n"
               "  -n, -np N              processes to start on this host\n"
               "  --tag-output           prefix every output line with \"[rank] \"\n"
               "  --separate-output DIR  write each process's output to DIR/rank.N.log\n"
               "  --timeout SEC          stop everything after SEC seconds (exit status 124)\n"
               "  -H h1:s1,h2:s2,...     place ranks on hosts, s slots each (default -n: all "
               "slots)\n"
               "  --netns                the hosts of -H are network namespaces of this machine\n");
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "weftrun: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "-n" || a == "-np" || a == "--np") {
      const char* v = value(a.c_str());
      if (!v) return false;
      char* end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (*end || n < 1 || n > 4096) {
        std::fprintf(stderr, "weftrun: bad process count '%s'\n", v);
        return false;
      }
      o->n = static_cast<int>(n);
    } else if (a == "-H" || a == "--host") {
      const char* v = value("-H");
      if (!v) return false;
      std::string list = v;
      size_t pos = 0;
      while (pos <= list.size()) {
        size_t comma = list.find(',', pos);
        std::string item =
            list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        Host h;
        size_t colon = item.rfind(':');
        h.name = item.substr(0, colon);
        if (colon != std::string::npos) {
          char* end = nullptr;
          long slots = std::strtol(item.c_str() + colon + 1, &end, 10);
          if (*end || slots < 1 || slots > 4096) {
            std::fprintf(stderr, "weftrun: bad slot count in '%s'\n", item.c_str());
            return false;
          }
          h.slots = static_cast<int>(slots);
        }
        if (h.name.empty()) {
          std::fprintf(stderr, "weftrun: empty host name in -H %s\n", v);
          return false;
        }
        o->hosts.push_back(h);
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (a == "--netns") {
      o->netns = true;
    } else if (a == "--tag-output") {
      o->output = Output::kTag;
    } else if (a == "--separate-output" || a.rfind("--separate-output=", 0) == 0) {
      const char* v = a == "--separate-output" ? value("--separate-output")
                                               : argv[i] + std::strlen("--separate-output=");
      if (!v || !*v) return false;
      o->output = Output::kSeparate;
      o->dir = v;
    } else if (a == "--timeout") {
      const char* v = value("--timeout");
      if (!v) return false;
      char* end = nullptr;
      o->timeout = std::strtod(v, &end);
      if (*end || o->timeout < 0) {
        std::fprintf(stderr, "weftrun: bad timeout '%s'\n", v);
        return false;
      }
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    } else if (a == "--") {
      if (i + 1 < argc) o->progIndex = i + 1;
      break;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "weftrun: unknown option '%s'\n", a.c_str());
      return false;
    } else {
      o->progIndex = i;
      break;
    }
  }
  int slots = 0;
  for (const Host& h : o->hosts) slots += h.slots;
  if (!o->hosts.empty()) {
    if (o->n == 0) o->n = slots;
    if (o->n > slots) {
      std::fprintf(stderr, "weftrun: %d processes but only %d slots in -H\n", o->n, slots);
      return false;
    }
  }
  if (o->netns && o->hosts.empty()) {
    std::fprintf(stderr, "weftrun: --netns needs -H\n");
    return false;
  }
  if (o->n < 1 || o->progIndex < 0) {
    usage(stderr);
    return false;
  }
  return true;
}

void writeAll(int fd, const char* p, size_t len);

// Where rank r runs: its host index, its index on that host and the host's rank count.
struct Placement {
  int host = 0, local = 0, localSize = 1;
};
std::vector<Placement> place(const Options& o) {
  std::vector<Placement> out(static_cast<size_t>(o.n));
  if (o.hosts.empty()) {
    for (int r = 0; r < o.n; ++r) out[r] = {0, r, o.n};
    return out;
  }
  std::vector<int> used(o.hosts.size(), 0);
  int r = 0;
  for (size_t h = 0; h < o.hosts.size() && r < o.n; ++h)
    for (int s = 0; s < o.hosts[h].slots && r < o.n; ++s, ++r) out[r] = {int(h), used[h]++, 0};
  for (auto& p : out) p.localSize = used[p.host];
  return out;
}

// Joins network namespace `name` (a name under /var/run/netns, or a path).
bool enterNetns(const std::string& name) {
  std::string path = name.find('/') == std::string::npos ? "/var/run/netns/" + name : name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "weftrun: no network namespace %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  int r = ::setns(fd, CLONE_NEWNET);
  int e = errno;
  ::close(fd);
  if (r != 0) {
    std::fprintf(stderr, "weftrun: cannot enter network namespace %s: %s\n", path.c_str(),
                 std::strerror(e));
    return false;
  }
  return true;
}

// The first non-loopback IPv4 address of the current network namespace, else 127.0.0.1.
std::string firstAddress() {
  ifaddrs* list = nullptr;
  std::string out = "127.0.0.1";
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    auto* a = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
    if (ntohl(a->sin_addr.s_addr) >> 24 == 127) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    out = text;
    break;
  }
  ::freeifaddrs(list);
  return out;
}

// MASTER_ADDR for the ranks: where rank 0 is reachable from every host.
std::string masterAddress(const Options& o) {
  if (!o.netns) return "127.0.0.1";
  int pipeFd[2];
  if (::pipe(pipeFd) != 0) return "127.0.0.1";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pipeFd[0]);
    std::string a = enterNetns(o.hosts[0].name) ? firstAddress() : "";
    writeAll(pipeFd[1], a.data(), a.size());
    std::_Exit(0);
  }
  ::close(pipeFd[1]);
  std::string a;
  char buf[64];
  ssize_t r;
  while ((r = ::read(pipeFd[0], buf, sizeof buf)) > 0) a.append(buf, static_cast<size_t>(r));
  ::close(pipeFd[0]);
  ::waitpid(pid, nullptr, 0);
  return a;
}

// -H names this machine?
bool isThisHost(const std::string& name) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return name == "localhost" || name == "127.0.0.1" || name == host;
}

// A TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT).
int freePort() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return 29500;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 29500;
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(s);
  return port;
}

bool makeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

void writeAll(int fd, const char* p, size_t len) {
  while (len > 0) {
    ssize_t w = ::write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    len -= static_cast<size_t>(w);
  }
}

// Emits the complete lines of s.pending with the rank prefix (everything at EOF).
void emitLines(Stream& s, int rank, bool eof) {
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  size_t start = 0;
  for (;;) {
    size_t nl = s.pending.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = prefix + s.pending.substr(start, nl - start + 1);
    writeAll(s.target, line.data(), line.size());
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (eof && !s.pending.empty()) {
    std::string line = prefix + s.pending + "\n";
    writeAll(s.target, line.data(), line.size());
    s.pending.clear();
  }
}

// Reads what is available; closes the stream at EOF.
void drain(Stream& s, int rank) {
  char buf[65536];
  for (;;) {
    ssize_t r = ::read(s.fd, buf, sizeof buf);
    if (r > 0) {
      s.pending.append(buf, static_cast<size_t>(r));
      emitLines(s, rank, false);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    ::close(s.fd);
    s.fd = -1;
    emitLines(s, rank, true);
    return;
  }
}

[[noreturn]] void execChild(const Options& o, char** argv, int rank, const Placement& at,
                            const std::string& master, const std::string& idFile, int port,
                            int outFd, int errFd) {
  auto set = [](const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); };
  const std::string r = std::to_string(rank), n = std::to_string(o.n);
  const std::string local = std::to_string(at.local), localSize = std::to_string(at.localSize);
  set("WEFT_RANK", r);
  set("WEFT_WORLD_SIZE", n);
  set("WEFT_LOCAL_RANK", local);
  set("WEFT_LOCAL_SIZE", localSize);
  set("RANK", r);
  set("WORLD_SIZE", n);
  set("LOCAL_RANK", local);
  set("LOCAL_WORLD_SIZE", localSize);
  set("MASTER_ADDR", master);
  set("MASTER_PORT", std::to_string(port));
  set("WEFT_ID_FILE", idFile);
  if (o.netns) {
    // A host of its own: its own network namespace and host identity.
    const std::string& host = o.hosts[static_cast<size_t>(at.host)].name;
    if (!enterNetns(host)) std::_Exit(127);
    set("WEFT_HOST_ID", host);
  }
  if (outFd >= 0) ::dup2(outFd, STDOUT_FILENO);
  if (errFd >= 0) ::dup2(errFd, STDERR_FILENO);
  if (outFd > STDERR_FILENO) ::close(outFd);
  if (errFd > STDERR_FILENO && errFd != outFd) ::close(errFd);
  ::execvp(argv[o.progIndex], argv + o.progIndex);
  std::fprintf(stderr, "weftrun: cannot run %s: %s\n", argv[o.progIndex], std::strerror(errno));
  std::_Exit(127);
}

int exitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) return 2;

  const char* tmp = std::getenv("TMPDIR");
  std::string dirTemplate = std::string(tmp && *tmp ? tmp : "/tmp") + "/weftrun.XXXXXX";
  std::vector<char> dirBuf(dirTemplate.begin(), dirTemplate.end());
  dirBuf.push_back('\0');
  if (!::mkdtemp(dirBuf.data())) {
    std::fprintf(stderr, "weftrun: mkdtemp(%s): %s\n", dirTemplate.c_str(), std::strerror(errno));
    return 2;
  }
  const std::string runDir = dirBuf.data();
  const std::string idFile = runDir + "/unique_id";
  const int port = freePort();
  for (const Host& h : o.hosts)
    if (!o.netns && !isThisHost(h.name)) {
      std::fprintf(stderr,
                   "weftrun: host '%s' is not this machine; weftrun starts processes here only "
                   "(use --netns for namespaces, or mpirun/srun across machines)\n",
                   h.name.c_str());
      ::rmdir(runDir.c_str());
      return 2;
    }
  const std::vector<Placement> placement = place(o);
  const std::string master = masterAddress(o);
  if (o.output == Output::kSeparate && !makeDirs(o.dir)) {
    std::fprintf(stderr, "weftrun: cannot create %s: %s\n", o.dir.c_str(), std::strerror(errno));
    ::rmdir(runDir.c_str());
    return 2;
  }

  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::fflush(stdout);
  std::fflush(stderr);

  std::vector<Child> children(static_cast<size_t>(o.n));
  int firstFailure = 0;
  bool killing = false;
  Clock::time_point killAt{};
  auto stopOthers = [&](int code) {
    if (!firstFailure) firstFailure = code;
    if (killing) return;
    killing = true;
    killAt = Clock::now() + std::chrono::seconds(2);
    for (Child& c : children)
      if (c.running) ::kill(c.pid, SIGTERM);
  };

  for (int rank = 0; rank < o.n; ++rank) {
    Child& c = children[static_cast<size_t>(rank)];
    c.rank = rank;
    int outPipe[2] = {-1, -1}, errPipe[2] = {-1, -1}, logFd = -1;
    if (o.output == Output::kTag) {
      if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0) {
        std::fprintf(stderr, "weftrun: pipe: %s\n", std::strerror(errno));
        stopOthers(2);
        break;
      }
    } else if (o.output == Output::kSeparate) {
      std::string log = o.dir + "/rank." + std::to_string(rank) + ".log";
      logFd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (logFd < 0) {
        std::fprintf(stderr, "weftrun: open(%s): %s\n", log.c_str(), std::strerror(errno));
        stopOthers(2);
        break;
      }
    }
    // Block SIGINT/SIGTERM across fork so one that arrives before the child has restored the
    // default action is not swallowed by our handler in the child; it stays pending instead.
    sigset_t block, saved;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &block, &saved);
    pid_t pid = ::fork();
    if (pid != 0) ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    if (pid < 0) {
      std::fprintf(stderr, "weftrun: fork: %s\n", std::strerror(errno));
      stopOthers(2);
      break;
    }
    if (pid == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGINT, &dfl, nullptr);
      ::sigaction(SIGTERM, &dfl, nullptr);
      ::sigprocmask(SIG_SETMASK, &saved, nullptr);
      const Placement& at = placement[static_cast<size_t>(rank)];
      if (o.output == Output::kTag)
        execChild(o, argv, rank, at, master, idFile, port, outPipe[1], errPipe[1]);
      execChild(o, argv, rank, at, master, idFile, port, logFd, logFd);
    }
    c.pid = pid;
    c.running = true;
    if (o.output == Output::kTag) {
      ::close(outPipe[1]);
      ::close(errPipe[1]);
      c.out.fd = outPipe[0];
      c.err.fd = errPipe[0];
      c.err.target = STDERR_FILENO;
      ::fcntl(c.out.fd, F_SETFL, O_NONBLOCK);
      ::fcntl(c.err.fd, F_SETFL, O_NONBLOCK);
    }
    if (logFd >= 0) ::close(logFd);
  }

  const auto start = Clock::now();
  Clock::time_point allExitedAt{};
  for (;;) {
    if (gSignal) {
      int sig = gSignal;
      gSignal = 0;
      for (Child& c : children)
        if (c.running) ::kill(c.pid, sig);
    }
    // Reap whatever has finished.
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (Child& c : children) {
        if (c.pid != pid || !c.running) continue;
        c.running = false;
        int code = exitCode(status);
        if (code != 0 && !killing) {
          if (WIFSIGNALED(status)) {
            std::fprintf(stderr, "weftrun: rank %d (pid %d) was killed by signal %d\n", c.rank,
                         static_cast<int>(pid), WTERMSIG(status));
          } else {
            std::fprintf(stderr, "weftrun: rank %d (pid %d) exited with status %d\n", c.rank,
                         static_cast<int>(pid), code);
          }
          stopOthers(code);
        }
      }
    }
    const auto now = Clock::now();
    if (o.timeout > 0 && !killing &&
        std::chrono::duration<double>(now - start).count() > o.timeout) {
      std::fprintf(stderr, "weftrun: timeout after %g s, stopping all processes\n", o.timeout);
      stopOthers(124);
    }
    if (killing && now >= killAt) {
      for (Child& c : children)
        if (c.running) ::kill(c.pid, SIGKILL);
    }

    bool anyRunning = false, anyOpen = false;
    for (Child& c : children) {
      anyRunning |= c.running;
      anyOpen |= c.out.fd >= 0 || c.err.fd >= 0;
    }
    if (!anyRunning) {
      if (allExitedAt == Clock::time_point{}) allExitedAt = now;
      // Output still held open by a grandchild gets one more second.
      if (!anyOpen || now - allExitedAt > std::chrono::seconds(1)) break;
    }

    if (o.output == Output::kTag && anyOpen) {
      std::vector<pollfd> fds;
      std::vector<std::pair<Child*, Stream*>> owners;
      for (Child& c : children) {
        for (Stream* s : {&c.out, &c.err}) {
          if (s->fd < 0) continue;
          fds.push_back({s->fd, POLLIN, 0});
          owners.push_back({&c, s});
        }
      }
      int ready = ::poll(fds.data(), fds.size(), 20);
      if (ready > 0) {
        for (size_t i = 0; i < fds.size(); ++i)
          if (fds[i].revents) drain(*owners[i].second, owners[i].first->rank);
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  for (Child& c : children) {
    for (Stream* s : {&c.out, &c.err}) {
      if (s->fd < 0) continue;
      ::close(s->fd);
      s->fd = -1;
      emitLines(*s, c.rank, true);
    }
  }
  ::unlink(idFile.c_str());
  ::rmdir(runDir.c_str());
  return firstFailure;
}
