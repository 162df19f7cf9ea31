// Tuning: every value that decides how Weft moves data, as one plain struct. A communicator
// fills it once at init (src/core/comm_config.h reads the knob registry, then init adds what it
// learns about the host) and passes it down: the executor, the waiting policy and the
// transports read their thresholds here, never from the environment or a process global, so
// two communicators of one process may differ and a test sets a value by building a Tuning.
// What each value means is documented with its knob in src/common/env.cc; the reasons behind
// the defaults are entries of perf/README.md's benchmark log, named in env.cc's help text.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace weft {

struct Tuning {
  // --- What init learns about this communicator's ranks on this host.
  int ranksOnHost = 1;       // this communicator's ranks on this host
  bool sharedCores = false;  // they outnumber the CPUs they may run on together

  // --- Timeouts.
  std::chrono::milliseconds timeout{60000};            // WEFT_TIMEOUT_MS: a wait without progress
  std::chrono::milliseconds bootstrapTimeout{120000};  // WEFT_BOOTSTRAP_TIMEOUT_MS: a rendezvous

  // --- Slot FIFOs (rank 0's geometry wins at init).
  uint64_t slotBytes = 131072;  // WEFT_SLOT_BYTES
  uint32_t slots = 8;           // WEFT_SLOTS

  // --- Transfer modes (src/exec/lower.cc).
  int64_t rendezvousSetting = -1;     // WEFT_RDV_BYTES; -1: auto (rendezvousBytes())
  uint64_t sharedRefBytes = 4194304;  // WEFT_SHARED_REF_BYTES
  uint64_t landingBytes = 262144;     // WEFT_LANDING_BYTES; 0: never
  // --- Store kinds (src/exec/lower.cc); 0: never stream.
  uint64_t streamBytes = 20971520;           // WEFT_STREAM_BYTES
  uint64_t streamReduceBytes = 3145728;      // WEFT_STREAM_REDUCE_BYTES
  uint64_t streamAllReduceBytes = 33554432;  // WEFT_STREAM_ALLREDUCE_BYTES
  uint64_t streamLandedBytes = 8388608;      // WEFT_STREAM_LANDED_BYTES

  // --- Waiting (src/exec/wait.cc, src/common/doorbell.cc).
  uint64_t spinNs = 200000;     // WEFT_SPIN_US
  uint64_t yieldNs = 1000000;   // WEFT_YIELD_US
  uint64_t holdNs = 50000;      // WEFT_HOLD_US; 0: ranks that share a core always yield
  bool asymmetricFence = true;  // WEFT_ASYMMETRIC_FENCE

  // --- Memory transports (transports/shm, transports/local).
  int shareCopy = 1;           // WEFT_SHARE_COPY: 0 off, 1 on, 2 on and the receiver waits (tests)
  bool shmCma = false;         // WEFT_SHM_CMA
  bool shmMap = true;          // WEFT_SHM_MAP
  bool shmDisabled = false;    // NCCL_SHM_DISABLE
  bool localDisabled = false;  // WEFT_LOCAL_DISABLE
  bool p2pDisabled = false;    // NCCL_P2P_DISABLE

  // --- Bootstrap (src/bootstrap).
  std::string commId;  // NCCL_COMM_ID: the root's ip:port instead of a random id

  // --- TCP (transports/tcp) and the bootstrap's interface choice.
  std::string net;              // NCCL_NET
  std::string netPlugin;        // NCCL_NET_PLUGIN
  std::string socketIfname;     // NCCL_SOCKET_IFNAME
  std::string socketFamily;     // NCCL_SOCKET_FAMILY
  int socketThreads = 1;        // NCCL_SOCKET_NTHREADS
  int socketsPerThread = 1;     // NCCL_NSOCKS_PERTHREAD
  int tcpSockBuf = 0;           // WEFT_TCP_SOCKBUF
  uint64_t tcpMinPart = 65536;  // WEFT_TCP_MIN_PART
  bool tcpPoll = false;         // WEFT_TCP_POLL
  bool tcpLowat = true;         // WEFT_TCP_LOWAT

  // --- Calls on device memory (src/cuda/device_kernels.h).
  bool deviceKernels = true;                         // WEFT_DEVICE_KERNELS
  uint32_t deviceThreads = 256;                      // WEFT_DEVICE_THREADS
  uint64_t deviceArenaBytes = 268435456;             // WEFT_DEVICE_ARENA_BYTES
  uint64_t deviceStagingBytes = 1048576;             // WEFT_DEVICE_STAGING_BYTES
  int deviceMaxConnections = 8;                      // CUDA_DEVICE_MAX_CONNECTIONS
  std::string mpsPipeDirectory = "/tmp/nvidia-mps";  // CUDA_MPS_PIPE_DIRECTORY
  // Direct peer-memory kernels (src/cuda/direct_launch.h).
  bool direct = true;                    // WEFT_DIRECT
  uint64_t directOneShotBytes = 262144;  // WEFT_DIRECT_ONESHOT_BYTES
  uint64_t directBlockBytes = 32768;     // WEFT_DIRECT_BLOCK_BYTES

  // --- RDMA (transports/ib).
  bool ibDisabled = false;     // NCCL_IB_DISABLE
  std::string ibHca;           // NCCL_IB_HCA
  int ibGidIndex = -1;         // NCCL_IB_GID_INDEX; -1: chosen per port
  int ibQpsPerConnection = 1;  // NCCL_IB_QPS_PER_CONNECTION
  int64_t ibMrCacheBytes = 0;  // WEFT_IB_MR_CACHE_BYTES

  // --- Placement (src/core/cpu_placement.cc).
  bool pin = true;        // WEFT_PIN
  bool pinShared = true;  // WEFT_PIN_SHARED

  // --- Topology (src/topo) and this host's identity.
  std::string topoFile;               // NCCL_TOPO_FILE
  std::string topoProbes = "all";     // WEFT_TOPO_PROBES
  std::string topoRates = "nominal";  // WEFT_TOPO_RATES
  std::string topoDumpFile;           // NCCL_TOPO_DUMP_FILE
  int topoDumpRank = 0;               // NCCL_TOPO_DUMP_FILE_RANK
  std::string hostId;                 // WEFT_HOST_ID

  // --- Plans from files and synthesis (src/select/plan_library.cc, src/core/synth_plans.cc).
  std::string planDirs;        // MSCCL_ALGO_DIR, then WEFT_PLAN_DIR (colon-separated)
  std::string synth = "auto";  // WEFT_SYNTH
  std::string synthCacheDir;   // WEFT_CACHE_DIR, else $HOME/.cache/weft/synth; empty: none

  // --- Algorithm choice (src/select, src/core).
  std::string algo;          // NCCL_ALGO
  double netLatencyUs = 30;  // WEFT_NET_LATENCY_US
  double netGbps = 10;       // WEFT_NET_GBPS
  bool netGbpsSet = false;   // set by the user: wins over the topology's figure

  // Every value from the environment (through the knob registry); host facts keep defaults.
  static Tuning fromEnvironment();

  // Smallest slice a send passes by reference rather than by copy through a slot:
  // WEFT_RDV_BYTES, or by default a few KiB while every rank has a core and more once ranks
  // outnumber the cores or the call writes again what it sends (`rewritesWhatItSends`: an
  // in-place allreduce reduces into the buffer its messages name, so a rank waits for its
  // reader before each such write). See perf/README.md, "Rendezvous threshold".
  uint64_t rendezvousBytes(bool rewritesWhatItSends) const;

  // What a copy collective's rank touches, as it weighs against streamBytes: the threshold was
  // found with 2 ranks on the host, and the host's ranks share its caches, so with more of them
  // each rank's bytes count ranks/2 times. See perf/README.md, "Streaming stores".
  uint64_t copyFootprint(uint64_t touched) const;

  // The effective values, one line, for NCCL_DEBUG=INFO.
  std::string describe() const;
};

// The knob registry's defaults (a constant): for what runs without a communicator's Tuning.
const Tuning& defaultTuning();

// `t`, or the defaults where it is null.
inline const Tuning& tuningOr(const Tuning* t) { return t ? *t : defaultTuning(); }

}  // namespace weft
