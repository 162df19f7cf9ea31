#include "src/common/tuning.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "src/common/env.h"
#include "src/common/log.h"

namespace weft {
namespace {

uint64_t bytes(const char* name) {
  return static_cast<uint64_t>(std::max<int64_t>(0, env::getInt(name)));
}

uint64_t microsAsNs(const char* name) { return bytes(name) * 1000; }

// WEFT_RDV_BYTES: a byte count, or auto (-1).
int64_t rendezvousFromEnv() {
  const std::string v = env::get("WEFT_RDV_BYTES");
  if (v == "auto") return -1;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0' || x < 0) {
    WEFT_WARN(ENV, "WEFT_RDV_BYTES=%s is neither a byte count nor auto; using auto", v.c_str());
    return -1;
  }
  return x;
}

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Tuning Tuning::fromEnvironment() {
  Tuning t;
  t.timeout = std::chrono::milliseconds(std::max<int64_t>(1, env::getInt("WEFT_TIMEOUT_MS")));
  t.bootstrapTimeout =
      std::chrono::milliseconds(std::max<int64_t>(1, env::getInt("WEFT_BOOTSTRAP_TIMEOUT_MS")));
  t.slotBytes = bytes("WEFT_SLOT_BYTES");
  t.slots = static_cast<uint32_t>(std::clamp<int64_t>(env::getInt("WEFT_SLOTS"), 0, 1 << 20));
  t.rendezvousSetting = rendezvousFromEnv();
  t.sharedRefBytes = bytes("WEFT_SHARED_REF_BYTES");
  t.landingBytes = bytes("WEFT_LANDING_BYTES");
  t.streamBytes = bytes("WEFT_STREAM_BYTES");
  t.streamReduceBytes = bytes("WEFT_STREAM_REDUCE_BYTES");
  t.streamAllReduceBytes = bytes("WEFT_STREAM_ALLREDUCE_BYTES");
  t.streamLandedBytes = bytes("WEFT_STREAM_LANDED_BYTES");
  t.spinNs = microsAsNs("WEFT_SPIN_US");
  t.yieldNs = microsAsNs("WEFT_YIELD_US");
  t.holdNs = microsAsNs("WEFT_HOLD_US");
  t.asymmetricFence = env::getInt("WEFT_ASYMMETRIC_FENCE") != 0;
  t.shareCopy = static_cast<int>(env::getInt("WEFT_SHARE_COPY"));
  t.shmCma = env::getInt("WEFT_SHM_CMA") != 0;
  t.shmMap = env::getInt("WEFT_SHM_MAP") != 0;
  t.shmDisabled = env::getInt("NCCL_SHM_DISABLE") != 0;
  t.localDisabled = env::getInt("WEFT_LOCAL_DISABLE") != 0;
  t.p2pDisabled = env::getInt("NCCL_P2P_DISABLE") != 0;
  t.commId = env::get("NCCL_COMM_ID");
  t.net = lowerCase(env::get("NCCL_NET"));
  t.netPlugin = env::get("NCCL_NET_PLUGIN");
  t.socketIfname = env::get("NCCL_SOCKET_IFNAME");
  t.socketFamily = env::get("NCCL_SOCKET_FAMILY");
  t.socketThreads =
      static_cast<int>(std::clamp<int64_t>(env::getInt("NCCL_SOCKET_NTHREADS"), 1, 16));
  t.socketsPerThread =
      static_cast<int>(std::clamp<int64_t>(env::getInt("NCCL_NSOCKS_PERTHREAD"), 1, 64));
  t.tcpSockBuf = static_cast<int>(std::clamp<int64_t>(env::getInt("WEFT_TCP_SOCKBUF"), 0, 1 << 30));
  t.tcpMinPart = std::max<uint64_t>(64, bytes("WEFT_TCP_MIN_PART"));
  t.tcpPoll = env::getInt("WEFT_TCP_POLL") != 0;
  t.tcpLowat = env::getInt("WEFT_TCP_LOWAT") != 0;
  t.deviceKernels = env::getInt("WEFT_DEVICE_KERNELS") != 0;
  t.deviceThreads = static_cast<uint32_t>(
      std::clamp<int64_t>(env::getInt("WEFT_DEVICE_THREADS"), 32, 512) / 32 * 32);
  t.deviceArenaBytes = std::max<uint64_t>(1 << 20, bytes("WEFT_DEVICE_ARENA_BYTES"));
  t.deviceStagingBytes = std::max<uint64_t>(64 << 10, bytes("WEFT_DEVICE_STAGING_BYTES"));
  t.deviceMaxConnections =
      static_cast<int>(std::clamp<int64_t>(env::getInt("CUDA_DEVICE_MAX_CONNECTIONS"), 1, 128));
  t.mpsPipeDirectory = env::get("CUDA_MPS_PIPE_DIRECTORY");
  t.direct = env::getInt("WEFT_DIRECT") != 0;
  t.directOneShotBytes = bytes("WEFT_DIRECT_ONESHOT_BYTES");
  t.directBlockBytes = std::max<uint64_t>(1, bytes("WEFT_DIRECT_BLOCK_BYTES"));
  t.ibDisabled = env::getInt("NCCL_IB_DISABLE") != 0;
  t.ibHca = env::get("NCCL_IB_HCA");
  t.ibGidIndex = static_cast<int>(std::clamp<int64_t>(env::getInt("NCCL_IB_GID_INDEX"), -1, 255));
  t.ibQpsPerConnection =
      static_cast<int>(std::clamp<int64_t>(env::getInt("NCCL_IB_QPS_PER_CONNECTION"), 1, 16));
  t.ibMrCacheBytes = std::max<int64_t>(0, env::getInt("WEFT_IB_MR_CACHE_BYTES"));
  t.topoFile = env::get("NCCL_TOPO_FILE");
  t.topoProbes = env::get("WEFT_TOPO_PROBES");
  t.topoRates = env::get("WEFT_TOPO_RATES");
  t.topoDumpFile = env::get("NCCL_TOPO_DUMP_FILE");
  t.topoDumpRank = static_cast<int>(env::getInt("NCCL_TOPO_DUMP_FILE_RANK"));
  t.hostId = env::get("WEFT_HOST_ID");
  t.planDirs = env::get("MSCCL_ALGO_DIR");
  if (const std::string more = env::get("WEFT_PLAN_DIR"); !more.empty())
    t.planDirs += (t.planDirs.empty() ? "" : ":") + more;
  t.synth = env::get("WEFT_SYNTH");
  t.synthCacheDir = env::get("WEFT_CACHE_DIR");
  if (const char* home = std::getenv("HOME"); t.synthCacheDir.empty() && home && *home)
    t.synthCacheDir = std::string(home) + "/.cache/weft/synth";
  t.pin = env::getInt("WEFT_PIN") != 0;
  t.pinShared = env::getInt("WEFT_PIN_SHARED") != 0;
  t.algo = env::get("NCCL_ALGO");
  t.netLatencyUs = env::getDouble("WEFT_NET_LATENCY_US");
  t.netGbps = env::getDouble("WEFT_NET_GBPS");
  t.netGbpsSet = env::isSet("WEFT_NET_GBPS");
  return t;
}

const Tuning& defaultTuning() {
  static const Tuning kDefaults;
  return kDefaults;
}

uint64_t Tuning::rendezvousBytes(bool rewritesWhatItSends) const {
  if (rendezvousSetting >= 0) return static_cast<uint64_t>(rendezvousSetting);
  return sharedCores || rewritesWhatItSends ? 32768 : 4096;
}

uint64_t Tuning::copyFootprint(uint64_t touched) const {
  return ranksOnHost > 2 ? touched * static_cast<uint64_t>(ranksOnHost) / 2 : touched;
}

std::string Tuning::describe() const {
  std::ostringstream o;
  o << "tuning: ranks on host " << ranksOnHost << (sharedCores ? " (sharing cores)" : "")
    << ", slots " << slots << " x " << slotBytes << " B, by reference from "
    << rendezvousBytes(false) << " B (in-place allreduce " << rendezvousBytes(true)
    << " B), landing from " << landingBytes << " B, streaming stores from " << streamBytes << " / "
    << streamReduceBytes << " / " << streamAllReduceBytes << " / " << streamLandedBytes
    << " B (copy / reduce / allreduce / landed), spin " << spinNs / 1000 << " us, yield "
    << yieldNs / 1000 << " us, hold " << holdNs / 1000 << " us, timeout " << timeout.count()
    << " ms";
  return o.str();
}

}  // namespace weft
