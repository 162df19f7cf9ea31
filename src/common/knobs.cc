#include "src/common/knobs.h"

#include <cstdlib>
#include <cstring>

#include "src/common/error.h"

namespace weft::env {

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> kKnobs = {
      {"NCCL_DEBUG", "WEFT_DEBUG", "WARN", "log level: NONE, VERSION, WARN, INFO, TRACE"},
      {"NCCL_DEBUG_SUBSYS", "WEFT_DEBUG_SUBSYS", "INIT,ENV",
       "comma list of subsystems (INIT, COLL, P2P, SHM, NET, BOOTSTRAP, ENV, TUNING, ALL; ^ "
       "negates)"},
      {"NCCL_DEBUG_FILE", "WEFT_DEBUG_FILE", "", "log file pattern (%h host, %p pid); appended to"},
      {"NCCL_ALGO", "WEFT_ALGO", "",
       "algorithm override: ring, tree, rhd, direct, rsag, fan, hier, msccl (plan library), synth "
       "(synthesized plans); '^x' excludes; 'allreduce:tree;broadcast:ring' per collective"},
      {"MSCCL_ALGO_DIR", nullptr, "",
       "colon-separated directories of MSCCL XML algorithm files (*.xml) loaded into the plan "
       "library at init"},
      {"WEFT_PLAN_DIR", nullptr, "",
       "more colon-separated directories of MSCCL XML plans for the plan library (after "
       "MSCCL_ALGO_DIR)"},
      {"WEFT_SYNTH", nullptr, "auto",
       "synthesized plans at communicator init: 1 on, 0 off, auto = on when the topology has GPUs "
       "or several hosts (NCCL_ALGO name: synth)"},
      {"WEFT_CACHE_DIR", nullptr, "",
       "directory of the synthesized-plan cache (empty: $HOME/.cache/weft/synth)"},
      {"NCCL_COMM_ID", "WEFT_COMM_ID", "", "ip:port of the bootstrap root instead of a random id"},
      {"NCCL_SOCKET_IFNAME", "WEFT_SOCKET_IFNAME", "",
       "interfaces for bootstrap sockets (prefix, ^exclude, =exact)"},
      {"WEFT_TIMEOUT_MS", nullptr, "60000",
       "milliseconds a collective, a point-to-point call or a bootstrap exchange after init may "
       "go without progress before it fails with ncclRemoteError naming the rank, the peer it "
       "waited for and the operation (a large call that keeps moving never times out)"},
      {"WEFT_BOOTSTRAP_TIMEOUT_MS", nullptr, "120000",
       "milliseconds communicator init (the rendezvous at the root and the ring of bootstrap "
       "connections) may take before it fails naming the ranks still missing"},
      {"WEFT_SLOT_BYTES", nullptr, "131072", "bytes per FIFO slot (pipelining slice)"},
      {"WEFT_SLOTS", nullptr, "8", "slots per connection FIFO and direction"},
      {"WEFT_RDV_BYTES", nullptr, "auto",
       "slices at least this large go by reference: the receiver copies them out of the sender's "
       "memory (in a process, or ncclMemAlloc'd buffers across processes); auto = 4096 when each "
       "rank has a core, 32768 when ranks outnumber the cores"},
      {"WEFT_SHARED_REF_BYTES", nullptr, "4194304",
       "largest message a plain send passes by reference when ranks outnumber the cores: the "
       "receiver takes it a slice at a time and releases it, waking the sender, once; 0 = one "
       "slice a message"},
      {"WEFT_YIELD_US", nullptr, "1000",
       "microseconds a waiting rank yields before it sleeps when this host has more ranks than "
       "CPUs"},
      {"WEFT_HOLD_US", nullptr, "50",
       "microseconds a waiting rank keeps its core, polling, while every rank pinned to the same "
       "core waits with nothing new to take (a yield would only cost two context switches); then "
       "it yields as usual; 0 always yields"},
      {"WEFT_PIN", nullptr, "1",
       "1 binds each rank's thread to a core at init (its own core when a host's ranks fit on its "
       "cores) when each process drives one rank and no launcher bound them; 0 leaves placement to "
       "the scheduler"},
      {"WEFT_PIN_SHARED", nullptr, "1",
       "1 (with WEFT_PIN=1): ranks that outnumber a host's cores are pinned too, dealt round-robin "
       "over the cores (steadier calls from 1 KiB up; small chained broadcasts a little slower); 0 "
       "leaves them to the scheduler"},
      {"WEFT_ASYMMETRIC_FENCE", nullptr, "1",
       "1: ringing a peer's doorbell needs no fence; a rank about to sleep forces one on every CPU "
       "instead (membarrier); 0: a fence per ring"},
      {"WEFT_SPIN_US", nullptr, "200",
       "microseconds a waiting rank spins before it sleeps (when each rank has a core; a sleep "
       "costs the waker a wake-up and the sleeper a barrier on every CPU)"},
      {"WEFT_LANDING_BYTES", nullptr, "262144",
       "a run of receives from one peer at least this large is offered to the sender, which then "
       "stores its data straight into the receiver's buffer as it reduces or forwards it (same "
       "process, or ncclMemAlloc'd buffers); 0 never"},
      {"WEFT_STREAM_LANDED_BYTES", nullptr, "8388608",
       "as WEFT_STREAM_BYTES, for results a rank also stores into a peer's landing (nobody rereads "
       "them); 0 never"},
      {"WEFT_STREAM_BYTES", nullptr, "20971520",
       "a rank whose input and output of one collective come to at least this many bytes together "
       "(counted once where they coincide) writes its output with non-temporal stores (no "
       "read-for-ownership); with more than 2 ranks on the host each rank's bytes count ranks/2 "
       "times (they share the caches); 0 never"},
      {"WEFT_STREAM_REDUCE_BYTES", nullptr, "3145728",
       "as WEFT_STREAM_BYTES, for reduce-scatter and reduce outputs; 0 never"},
      {"WEFT_STREAM_ALLREDUCE_BYTES", nullptr, "33554432",
       "as WEFT_STREAM_BYTES, for allreduce outputs (peers reread them, so they stay cached while "
       "the buffers fit the cache); 0 never"},
      {"WEFT_SHARE_COPY", nullptr, "1",
       "1 lets a sender that waits for its large by-reference message to be read copy part of it "
       "into the receiver's memory (same process, or ncclMemAlloc'd buffers), when each rank has a "
       "core; 0: receivers copy alone; 2: as 1, and the receiver waits for the sender's first "
       "piece (tests)"},
      {"WEFT_SHM_MAP", nullptr, "1",
       "1 lets shm receivers read large slices of ncclMemAlloc'd buffers in place by mapping the "
       "sender's memory; 0 copies them through slots"},
      {"WEFT_SHM_CMA", nullptr, "0",
       "1 lets shm receivers read large slices straight from the sender (process_vm_readv) instead "
       "of through slots"},
      {"NCCL_SHM_DISABLE", "WEFT_SHM_DISABLE", "0", "1 disables the shared-memory transport"},
      {"WEFT_DEVICE_KERNELS", nullptr, "1",
       "calls on device memory among ranks of one process on one GPU run in the device "
       "interpreter's kernel (0: staged through host memory, as between processes)"},
      {"WEFT_DEVICE_THREADS", nullptr, "256",
       "threads per block of the device interpreter's kernel (32-512, a multiple of 32)"},
      {"WEFT_DEVICE_ARENA_BYTES", nullptr, "268435456",
       "device memory each GPU's ranks of a communicator reserve at their first call for the "
       "kernels' FIFOs, plans, counters and scratch (it grows only while none of their launches "
       "runs: allocating synchronises the GPU under kernels that wait for peers)"},
      {"WEFT_DEVICE_STAGING_BYTES", nullptr, "1048576",
       "pinned host memory each GPU's ranks of a communicator reserve at their first call for "
       "copying plans into device memory (larger copies go in pieces)"},
      {"CUDA_DEVICE_MAX_CONNECTIONS", nullptr, "8",
       "CUDA's hardware queues per GPU (read, not set): at 1 every stream shares one queue, so the "
       "ranks of a process on one GPU run each call as one kernel launched by the last to call"},
      {"CUDA_MPS_PIPE_DIRECTORY", nullptr, "/tmp/nvidia-mps",
       "where the CUDA MPS control daemon's pipe lives (read, not set): without MPS, processes "
       "sharing a GPU stage their calls on device memory instead of running kernels that wait "
       "for each other"},
      {"WEFT_DIRECT", nullptr, "1",
       "collectives on device memory among ranks whose buffers every rank's kernel can address "
       "(one process, one GPU or GPUs with peer access) load and store the peers' buffers "
       "directly (0: the device interpreter's FIFOs)"},
      {"WEFT_DIRECT_ONESHOT_BYTES", nullptr, "262144",
       "direct allreduce: calls of at most this many bytes are one-shot (every rank reduces all "
       "elements from every input: least latency), larger ones two-shot (each rank reduces 1/n "
       "and stores it into every output: each element reduced once)"},
      {"WEFT_DIRECT_BLOCK_BYTES", nullptr, "32768",
       "direct kernels: bytes of a rank's share of a call per thread block at least (fewer, "
       "fuller blocks for small calls; at most the GPU's SMs shared among its ranks)"},
      {"WEFT_CUDA_DRIVER", nullptr, "libcuda.so.1",
       "the CUDA driver library loaded (dlopen) to tell device memory from host memory and to "
       "run calls on device memory"},
      {"WEFT_LOCAL_DISABLE", nullptr, "0",
       "1 disables the in-process transport (ranks in one process then use shm)"},
      {"NCCL_P2P_DISABLE", "WEFT_P2P_DISABLE", "0",
       "1 disables direct peer-memory transports (in host mode: the in-process one; ranks fall "
       "back to shm)"},
      {"NCCL_NET", "WEFT_NET", "",
       "network transport between hosts: IB (ibverbs), Socket (tcp) or the name of the plugin "
       "NCCL_NET_PLUGIN loaded; empty: the plugin where one is loaded, else ib where both ranks "
       "have an active RDMA port, else tcp; anything else leaves no network transport"},
      {"NCCL_NET_PLUGIN", "WEFT_NET_PLUGIN", "",
       "external network plugin (NCCL's ncclNet v11/v10): a comma list of names, each tried as "
       "libnccl-net-<name>.so, then as given (a file or path); none or empty: no plugin. A "
       "loaded plugin carries traffic between hosts; NCCL_NET=<its name> selects it alone"},
      {"NCCL_IB_DISABLE", "WEFT_IB_DISABLE", "0", "1 disables the ibverbs transport"},
      {"NCCL_IB_HCA", "WEFT_IB_HCA", "",
       "ib: devices to use, e.g. mlx5_0:1,mlx5_1 (^ excludes the listed ones, = matches names "
       "exactly instead of by prefix, :N picks a port); empty: every device with an active port"},
      {"NCCL_IB_GID_INDEX", "WEFT_IB_GID_INDEX", "-1",
       "ib: GID index on RoCE ports (-1: the port's RoCE v2 GID of an IPv4 address, else its "
       "first RoCE v2 one)"},
      {"NCCL_IB_QPS_PER_CONNECTION", "WEFT_IB_QPS_PER_CONNECTION", "1",
       "ib: queue pairs per connection (a message is split over them)"},
      {"WEFT_IB_MR_CACHE_BYTES", nullptr, "0",
       "ib: bytes of registrations of buffers the user did not register kept once unused (0: "
       "none; a kept one turns stale if its memory is freed and mapped again)"},
      {"NCCL_NSOCKS_PERTHREAD", "WEFT_NSOCKS_PERTHREAD", "1",
       "tcp: sockets per connection and progress thread (a message is striped over them)"},
      {"NCCL_SOCKET_NTHREADS", "WEFT_SOCKET_NTHREADS", "1",
       "tcp: progress threads per process (each connection's sockets spread over them)"},
      {"NCCL_SOCKET_FAMILY", "WEFT_SOCKET_FAMILY", "",
       "tcp transport address family: AF_INET or AF_INET6 (empty: as NCCL_SOCKET_IFNAME picks)"},
      {"WEFT_TCP_SOCKBUF", nullptr, "0",
       "tcp: SO_SNDBUF/SO_RCVBUF bytes per socket (0 keeps the kernel's autotuning)"},
      {"WEFT_TCP_MIN_PART", nullptr, "65536",
       "tcp: smallest stripe of a slot sent on one socket, in bytes"},
      {"WEFT_TCP_POLL", nullptr, "0",
       "tcp: 1 lets a waiting rank read its sockets itself instead of waiting for the progress "
       "thread"},
      {"WEFT_TCP_LOWAT", nullptr, "1",
       "tcp: 1 sets SO_RCVLOWAT to the rest of a stripe, so the progress thread wakes once per "
       "stripe"},
      {"WEFT_HOST_ID", nullptr, "",
       "extra host identity mixed into the host hash (tells network-namespace hosts apart)"},
      {"WEFT_NET_GBPS", nullptr, "10",
       "bandwidth of one link between hosts in Gbit/s (algorithm choice only)"},
      {"WEFT_NET_LATENCY_US", nullptr, "30",
       "latency of one message between hosts in microseconds (algorithm choice only)"},
      {"WEFT_SIMD", nullptr, "", "force kernel ISA: scalar, avx2, avx512"},
      {"NCCL_TOPO_FILE", "WEFT_TOPO_FILE", "",
       "NCCL topology XML to use instead of probing this host (completed from the probes)"},
      {"NCCL_TOPO_DUMP_FILE", "WEFT_TOPO_DUMP_FILE", "",
       "write the communicator's system topology as NCCL XML to this file at init"},
      {"NCCL_TOPO_DUMP_FILE_RANK", "WEFT_TOPO_DUMP_FILE_RANK", "0",
       "the rank that writes NCCL_TOPO_DUMP_FILE"},
      {"WEFT_TOPO_PROBES", nullptr, "all",
       "topology probes: all, none, a list of hwloc,sysfs,ibverbs,nvml,cuda, or ^list to exclude"},
      {"WEFT_TOPO_RATES", nullptr, "nominal",
       "topology link rates: nominal (hardware rates) or nccl (NCCL's model constants)"},
  };
  return kKnobs;
}

const Knob& knob(const char* name) {
  for (const auto& k : knobs())
    if (std::strcmp(k.name, name) == 0) return k;
  fail(Status::kInternalError, std::string("unregistered environment knob ") + name);
}

bool isSet(const char* name) {
  const Knob& k = knob(name);
  return std::getenv(k.name) || (k.alias && std::getenv(k.alias));
}

std::string get(const char* name) {
  const Knob& k = knob(name);
  if (const char* v = std::getenv(k.name)) return v;
  if (k.alias)
    if (const char* v = std::getenv(k.alias)) return v;
  return k.fallback;
}

double getDouble(const char* name) { return std::strtod(get(name).c_str(), nullptr); }

}  // namespace weft::env
