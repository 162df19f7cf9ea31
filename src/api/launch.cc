// weftGetUniqueIdFromEnv and weftCommInitFromEnv: a communicator from a launcher's environment,
// without passing a unique id around. Every process builds the same id from its environment: the
// root address (MASTER_ADDR:MASTER_PORT, or under srun the step's first node and a port derived
// from the job and step ids) and a secret (WEFT_JOB_SECRET, or one derived from the job's
// identity); the process of rank 0 serves the rendezvous there.
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "src/api/handle.h"
#include "src/api/launch_env.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/secret.h"
#include "src/bootstrap/unique_id.h"
#include "src/common/env.h"
#include "weft/weft.h"

namespace weft::api {
namespace {

std::string getEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The first of `names` that is set, else "" (and `which` names the first).
std::string firstEnv(std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) {
      *which = n;
      return v;
    }
  *which = *names.begin();
  return "";
}

int parseInt(const std::string& text, const char* name, int lo, int hi) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    fail(Status::kInvalidArgument, std::string(name) + "=" + text + " is not an integer in [" +
                                       std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

// 32 secret bytes every rank derives alike.
bootstrap::Secret deriveSecret(const std::string& material) {
  bootstrap::Secret s{};
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t h = bootstrap::hashBytes(material.data(), material.size(), 0x5745465400ull + i);
    std::memcpy(s.data() + i, &h, 8);
  }
  return s;
}

bootstrap::SocketAddress anyAddress(int family, uint16_t port) {
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    len = sizeof(*a);
  }
  bootstrap::SocketAddress out(reinterpret_cast<sockaddr*>(&ss), len);
  out.setPort(port);
  return out;
}

// Who placed this process, as the launcher's variables say.
struct RankSource {
  std::string rankText, sizeText, localText;
  const char *rankVar = nullptr, *sizeVar = nullptr, *localVar = nullptr;
  bool slurm = false;  // srun: the rendezvous address may come from the job step
};

// torchrun's variables (each overridden by its WEFT_ twin), else Open MPI's, MPICH/PMI's, then
// srun's. Only srun sets SLURM_STEP_NUM_TASKS: a batch script's own process, which has
// SLURM_PROCID=0 and the job's SLURM_NTASKS, is one process, not rank 0 of several.
RankSource findRankSource() {
  RankSource s;
  s.rankText = firstEnv({"WEFT_RANK", "RANK"}, &s.rankVar);
  s.sizeText = firstEnv({"WEFT_WORLD_SIZE", "WORLD_SIZE"}, &s.sizeVar);
  s.localText = firstEnv({"WEFT_LOCAL_RANK", "LOCAL_RANK"}, &s.localVar);
  if (!s.rankText.empty() || !s.sizeText.empty()) return s;
  static const struct {
    const char *rank, *size, *local;
  } kLaunchers[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"},
  };
  for (const auto& l : kLaunchers) {
    std::string rank = getEnv(l.rank), size = getEnv(l.size);
    if (rank.empty() || size.empty()) continue;
    s.rankText = rank;
    s.sizeText = size;
    s.localText = getEnv(l.local);
    s.rankVar = l.rank;
    s.sizeVar = l.size;
    s.localVar = l.local;
    s.slurm = std::strcmp(l.rank, "SLURM_PROCID") == 0;
    return s;
  }
  return s;
}

// The rendezvous every process of the job derives alike.
struct Rendezvous {
  int rank = 0, size = 0;
  RankSource source;
  std::string host, port;  // as the environment gives them (the secret is made from the text)
  std::string whence;      // which variables named host and port, for the log
  bootstrap::SocketAddress root;
  bool listenAnywhere = false;  // rank 0 listens on every address, not on `root` only
  bootstrap::Secret secret{};
};

Rendezvous readRendezvous() {
  Rendezvous z;
  z.source = findRankSource();
  const RankSource& s = z.source;
  const char *addrVar, *portVar;
  z.host = firstEnv({"WEFT_MASTER_ADDR", "MASTER_ADDR"}, &addrVar);
  z.port = firstEnv({"WEFT_MASTER_PORT", "MASTER_PORT"}, &portVar);
  z.whence = std::string(addrVar) + ", " + portVar;
  std::string job = getEnv("SLURM_JOB_ID"), step = getEnv("SLURM_STEP_ID");
  if (s.slurm && !job.empty() && !step.empty()) {
    // srun: task 0 runs on the step's first node; the port comes from the job and step ids.
    const char* listVar;
    std::string list =
        firstEnv({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, &listVar);
    if (z.host.empty() && !list.empty()) {
      z.host = launchenv::firstSlurmHost(list);
      if (z.host.empty())
        fail(Status::kInvalidArgument,
             std::string(listVar) + "=" + list + " is not a Slurm host list; set MASTER_ADDR");
      addrVar = listVar;
      // The node may resolve its own name to a loopback address (Debian's 127.0.1.1).
      z.listenAnywhere = true;
    }
    if (z.port.empty()) {
      z.port = std::to_string(launchenv::slurmPort(job, step));
      portVar = "SLURM_JOB_ID.SLURM_STEP_ID";
    }
    z.whence = std::string(addrVar) + ", " + portVar;
  }

  std::string missing;
  for (auto [value, name] : {std::pair{&s.rankText, "RANK"},
                             {&s.sizeText, "WORLD_SIZE"},
                             {&z.host, "MASTER_ADDR"},
                             {&z.port, "MASTER_PORT"}})
    if (value->empty()) missing += std::string(missing.empty() ? "" : ", ") + name;
  if (!missing.empty()) {
    std::string how;
    if (s.rankText.empty())
      how =
          "torchrun's variables, WEFT_RANK, WEFT_WORLD_SIZE, WEFT_MASTER_ADDR and "
          "WEFT_MASTER_PORT, or srun's";
    else if (s.slurm)
      how = "under srun SLURM_JOB_ID, SLURM_STEP_ID and SLURM_STEP_NODELIST stand in for them";
    else if (std::strcmp(s.rankVar, "RANK") == 0 || std::strcmp(s.rankVar, "WEFT_RANK") == 0)
      how = std::string(s.rankVar) + " is set: set MASTER_ADDR to rank 0's host and MASTER_PORT " +
            "to a port free there";
    else
      how = std::string(s.rankVar) +
            " is set, but an MPI launcher names no rendezvous address: set MASTER_ADDR to rank "
            "0's host and MASTER_PORT to a port free there, or use weftCommInitFromMpi "
            "(weft/weft_mpi.h)";
    fail(Status::kInvalidArgument, missing + " not set (" + how + ")");
  }
  z.size = parseInt(s.sizeText, s.sizeVar, 1, 1 << 24);
  z.rank = parseInt(s.rankText, s.rankVar, 0, z.size - 1);
  parseInt(z.port, portVar, 1, 65535);
  if (!s.localText.empty()) parseInt(s.localText, s.localVar, 0, z.size - 1);

  // "host:port", "1.2.3.4:port" or "[v6]:port"; a bare IPv6 address needs brackets.
  std::string hostPart =
      z.host.find(':') != std::string::npos && z.host.front() != '[' ? "[" + z.host + "]" : z.host;
  z.root = bootstrap::SocketAddress::parse(hostPart + ":" + z.port);

  // Not an env-registry knob on purpose: the registry prints every value at INFO.
  std::string material = getEnv("WEFT_JOB_SECRET");
  if (material.empty() && s.slurm && !job.empty() && !step.empty()) {
    // Tells this step's tasks from those of other jobs that land on the same port; anyone who
    // can read the job's ids can still join, which WEFT_JOB_SECRET closes.
    material = "weft-slurm/" + getEnv("SLURM_CLUSTER_NAME") + "/" + job + "." + step + "/" +
               s.sizeText + "/" + z.host + ":" + z.port;
  } else if (material.empty()) {
    // Without a job secret anyone who knows the address and size can join, as with torchrun's
    // own store; WEFT_JOB_SECRET closes that. The address enters as text: a host name may
    // resolve differently on different hosts.
    material = "weft-env/" + z.host + ":" + z.port + "/" + s.sizeText + "/" +
               getEnv("TORCHELASTIC_RUN_ID");
  }
  z.secret = deriveSecret(material);
  return z;
}

void serveRendezvous(const Rendezvous& z) {
  // Listen on the root address itself when it is one of ours, else on every address.
  bootstrap::Socket listen;
  if (!z.listenAnywhere) {
    try {
      listen = bootstrap::Socket::listen(z.root);
    } catch (const Error&) {
    }
  }
  if (listen.fd() < 0) {
    try {
      listen = bootstrap::Socket::listen(anyAddress(z.root.family(), z.root.port()));
    } catch (const Error& e) {
      fail(Status::kSystemError, std::string(e.what()) + " (rank 0 serves the rendezvous on port " +
                                     z.port +
                                     "; set WEFT_MASTER_PORT to a free port on every rank)");
    }
  }
  auto timeout =
      std::chrono::milliseconds(std::max<int64_t>(1, env::getInt("WEFT_BOOTSTRAP_TIMEOUT_MS")));
  bootstrap::startRoot(std::move(listen), z.secret, timeout);
}

}  // namespace
}  // namespace weft::api

using namespace weft;

WEFT_EXPORT ncclResult_t weftGetUniqueIdFromEnv(ncclUniqueId* id, int* rank, int* nranks) {
  return api::guard("weftGetUniqueIdFromEnv", [&](std::string*) {
    if (!id || !rank || !nranks) fail(Status::kInvalidArgument, "a result pointer is NULL");
    api::Rendezvous z = api::readRendezvous();
    bootstrap::UniqueIdBytes bytes = bootstrap::encodeUniqueId(z.root, z.secret);
    static_assert(sizeof(bytes.bytes) == sizeof(id->internal));
    if (z.rank == 0) api::serveRendezvous(z);
    std::memcpy(id->internal, bytes.bytes, sizeof(id->internal));
    *rank = z.rank;
    *nranks = z.size;
    WEFT_INFO(INIT, "weftGetUniqueIdFromEnv: rank %d of %d (%s, %s), local rank %s, root %s (%s)",
              z.rank, z.size, z.source.rankVar, z.source.sizeVar,
              z.source.localText.empty() ? "-" : z.source.localText.c_str(),
              z.root.toString().c_str(), z.whence.c_str());
    return Status::kSuccess;
  });
}

WEFT_EXPORT ncclResult_t weftCommInitFromEnv(ncclComm_t* comm) {
  ncclUniqueId id;
  int rank = 0, size = 0;
  if (!comm) {
    return api::guard("weftCommInitFromEnv", [&](std::string*) -> Status {
      fail(Status::kInvalidArgument, "comm pointer is NULL");
    });
  }
  ncclResult_t r = weftGetUniqueIdFromEnv(&id, &rank, &size);
  if (r != ncclSuccess) return r;
  return ncclCommInitRank(comm, size, id, rank);
}
