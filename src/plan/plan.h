// The Plan IR: every algorithm (built-in, synthesized, imported MSCCL XML) is a Plan, and the
// executor runs nothing else. A Plan holds one Program per rank; a Program is a set of lanes
// (MSCCL thread blocks / NCCL channels); a lane is an ordered list of steps over element ranges
// of the rank's buffers. Offsets and counts are in elements, so a Plan is type-agnostic.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace weft::plan {

enum class Collective : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,  // a group of point-to-point operations
};
const char* collectiveName(Collective c);  // "allreduce", "broadcast", ... "sendrecv"

// Buffers of one rank. Input / Output are the user's send / recv buffers (they may alias for
// in-place calls), Scratch is executor-owned, Extra+i are further user buffers (p2p groups).
enum : uint16_t { kInput = 0, kOutput = 1, kScratch = 2, kExtra = 3 };

struct Ref {
  uint16_t buffer = kInput;
  uint64_t offset = 0;  // elements
};

// Step kinds follow MSCCL. "recv" data is what arrives from recvPeer; "src" is the local operand.
enum class Op : uint8_t {
  kNop,                 // only waits for its dependencies
  kSend,                // send src[0,count) to sendPeer
  kRecv,                // dst = incoming
  kRecvReduce,          // dst = dst (op) incoming
  kRecvCopySend,        // dst = incoming; forward incoming to sendPeer
  kRecvReduceSend,      // forward (src (op) incoming) to sendPeer
  kRecvReduceCopy,      // dst = src (op) incoming
  kRecvReduceCopySend,  // dst = src (op) incoming; forward it to sendPeer
  kCopy,                // dst = src
  kReduce,              // dst = dst (op) src
};
const char* opName(Op op);
// Inline: the executor asks these for every step it starts.
inline bool opSends(Op op) {
  return op == Op::kSend || op == Op::kRecvCopySend || op == Op::kRecvReduceSend ||
         op == Op::kRecvReduceCopySend;
}
inline bool opRecvs(Op op) {
  return op == Op::kRecv || op == Op::kRecvReduce || op == Op::kRecvCopySend ||
         op == Op::kRecvReduceSend || op == Op::kRecvReduceCopy || op == Op::kRecvReduceCopySend;
}
// Uses `src` as an operand.
inline bool opReadsSrc(Op op) {
  return op == Op::kSend || op == Op::kRecvReduceSend || op == Op::kRecvReduceCopy ||
         op == Op::kRecvReduceCopySend || op == Op::kCopy || op == Op::kReduce;
}
// Writes `dst`.
inline bool opWritesDst(Op op) {
  return op == Op::kRecv || op == Op::kRecvReduce || op == Op::kRecvCopySend ||
         op == Op::kRecvReduceCopy || op == Op::kRecvReduceCopySend || op == Op::kCopy ||
         op == Op::kReduce;
}

struct StepRef {
  int32_t lane = 0;
  int32_t step = 0;
};

struct Step {
  Op op = Op::kNop;
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  Ref src;
  Ref dst;
  uint64_t count = 0;         // elements
  std::vector<StepRef> deps;  // steps (same rank) that must be complete before this one starts
};

struct Lane {
  int32_t channel = 0;  // connection channel: lanes exchanging data with the same peer concurrently
                        // use different channels
  std::vector<Step> steps;
  // Relative share of link bandwidth this lane's transfers claim against other lanes' (1 =
  // equal). A scheduling hint: executors that interleave lanes may give a lane `share` slices or
  // thread blocks per turn; executors that ignore it stay correct. Not in MSCCL XML.
  uint32_t share = 1;
  // Channel of the lane's sends where it differs from `channel` (-1: the same). Lets one step
  // take its input from one FIFO and forward on another that a different lane of the peer
  // receives (a 2-rank allreduce's reduce-and-forward). Not in MSCCL XML.
  int32_t sendChannel = -1;
  // Plain sends of this lane store their data into the receiver's buffer where it offered it
  // (a landing), instead of leaving the receiver to read it: a rank that sends each slice to
  // several peers in turn reads it once, and writes every copy while it is in cache. A hint,
  // like `share`: without an offer the send goes as usual. Not in MSCCL XML.
  bool push = false;
};

// The channel a lane's sends go out on.
inline int32_t sendChannelOf(const Lane& lane) {
  return lane.sendChannel < 0 ? lane.channel : lane.sendChannel;
}

struct Program {
  std::vector<Lane> lanes;
  uint64_t scratchElems = 0;
  std::vector<uint64_t> extraElems;  // size of each Extra buffer (p2p)
};

// What a Plan computes. `count` is the API's count argument (per-rank count for allgather /
// reduce-scatter / alltoall / gather / scatter, like NCCL).
struct Spec {
  Collective coll = Collective::kAllReduce;
  int32_t nranks = 1;
  int32_t root = 0;
  uint64_t count = 0;
  uint32_t elemSize = 4;  // only for alignment of chunk boundaries
};

// Buffer sizes (elements) of one rank for a spec: {input, output}.
struct BufferSizes {
  uint64_t input = 0;
  uint64_t output = 0;
};
BufferSizes bufferSizes(const Spec& spec, int rank);

struct Plan {
  std::string algorithm;  // "ring", "tree", "rhd", "direct", "msccl:<name>", ...
  Spec spec;
  bool inPlaceSafe = true;  // may input and output alias as NCCL's in-place rules say
  // False for plans that only work in place (MSCCL inplace=1 outofplace=0): they treat Input as
  // the one user buffer and may write it, so they run only when input and output alias.
  bool outOfPlaceSafe = true;
  std::vector<Program> programs;  // one per rank
  // How many pieces cutIntoPieces (src/plan/pieces.h) cut the program into (1: run whole).
  uint64_t pieces = 1;
};

// Human-readable dump (one line per step), used by tests and weft-synth.
std::string toText(const Plan& plan);

}  // namespace weft::plan
