#include "synth/solver/lower.h"

#include <algorithm>
#include <map>

#include "src/common/error.h"

namespace weft::synth::solver {
namespace {

using plan::Lane;
using plan::Op;
using plan::Ref;
using plan::Step;
using plan::StepRef;

[[noreturn]] void reject(const Schedule& s, const std::string& what) {
  throw Error(Status::kInvalidArgument, "lowering " + describe(s.instance.spec) + " schedule (S=" +
                                            std::to_string(s.steps) + " R=" +
                                            std::to_string(s.rounds) + " C=" +
                                            std::to_string(s.instance.chunks) + "): " + what);
}

// Where rank n keeps chunk k: the source reads its input, destinations their output, relays a
// scratch slot.
class Placement {
 public:
  explicit Placement(const Instance& in) : in_(in), scratch_(in.nranks) {}

  Ref at(int k, int n) {
    const ChunkInfo& c = in_.chunkInfo[k];
    if (n == c.source) return {plan::kInput, c.inputOffset};
    if (std::find(c.destinations.begin(), c.destinations.end(), n) != c.destinations.end())
      return {plan::kOutput, c.outputOffset};
    auto [it, fresh] = slots_.emplace(std::make_pair(k, n), scratch_[n]);
    if (fresh) ++scratch_[n];
    return {plan::kScratch, it->second};
  }
  uint64_t scratchChunks(int n) const { return scratch_[n]; }

 private:
  const Instance& in_;
  std::vector<uint64_t> scratch_;
  std::map<std::pair<int, int>, uint64_t> slots_;
};

}  // namespace

plan::ChunkPlan lowerToChunkPlan(const RankGraph& graph, const Schedule& schedule,
                                 const std::string& name) {
  const Instance& in = schedule.instance;
  const int n = in.nranks;
  if (graph.nranks != n)
    reject(schedule, "graph has " + std::to_string(graph.nranks) + " ranks, schedule " +
                         std::to_string(n));
  plan::ChunkPlan cp;
  cp.name = !name.empty() ? name
                          : "sccl-" + std::string(plan::collectiveName(in.spec.coll)) + "-s" +
                                std::to_string(schedule.steps) + "-r" +
                                std::to_string(schedule.rounds) + "-c" +
                                std::to_string(in.chunks);
  cp.coll = in.spec.coll;
  cp.nranks = n;
  cp.root = in.spec.root;
  cp.chunksPerLoop = in.chunksPerLoop;
  // Alltoall receives into slots of the shared buffer that may not have been sent yet.
  cp.inPlace = in.spec.coll != plan::Collective::kAlltoAll;
  cp.programs.resize(n);
  Placement place(in);

  // Per link and step, the sends in order; each takes the channel of its position mod units.
  struct Move {
    int chunk, step, channel;
  };
  std::map<std::pair<int, int>, std::vector<Move>> byLink;
  std::map<std::pair<int, int>, int> perStep;  // (link key, step) -> sends so far
  for (const ChunkSend& m : schedule.sends) {
    if (m.from < 0 || m.from >= n || m.to < 0 || m.to >= n || graph.capacity[m.from][m.to] <= 0)
      reject(schedule, "chunk " + std::to_string(m.chunk) + " crosses " + std::to_string(m.from) +
                           "->" + std::to_string(m.to) + ", which is not a link");
    if (m.step < 0 || m.step >= schedule.steps || m.chunk < 0 ||
        m.chunk >= static_cast<int>(in.chunkInfo.size()))
      reject(schedule, "a send names step " + std::to_string(m.step) + " chunk " +
                           std::to_string(m.chunk));
    const int units = graph.capacity[m.from][m.to];
    int& pos = perStep[{m.from * n + m.to, m.step}];
    byLink[{m.from, m.to}].push_back({m.chunk, m.step, pos++ % units});
  }

  // Receive lanes first: they depend on nothing, and sends point at them.
  std::map<std::pair<int, int>, StepRef> arrival;  // (chunk, rank) -> its receive step
  std::map<std::pair<int, int>, int> arrivalStep;  // (chunk, rank) -> step it arrives in
  for (const auto& [link, moves] : byLink) {
    const auto [from, to] = link;
    plan::ChunkProgram& prog = cp.programs[to];
    for (int ch = 0; ch < graph.capacity[from][to]; ++ch) {
      Lane lane;
      lane.channel = ch;
      for (const Move& mv : moves) {
        if (mv.channel != ch) continue;
        if (arrival.count({mv.chunk, to}))
          reject(schedule, "chunk " + std::to_string(mv.chunk) + " reaches rank " +
                               std::to_string(to) + " twice");
        arrival[{mv.chunk, to}] = {static_cast<int32_t>(prog.lanes.size()),
                                   static_cast<int32_t>(lane.steps.size())};
        arrivalStep[{mv.chunk, to}] = mv.step;
        Step st;
        st.op = Op::kRecv;
        st.recvPeer = from;
        st.dst = place.at(mv.chunk, to);
        st.count = 1;
        lane.steps.push_back(st);
      }
      if (!lane.steps.empty()) prog.lanes.push_back(std::move(lane));
    }
  }
  for (const auto& [link, moves] : byLink) {
    const auto [from, to] = link;
    plan::ChunkProgram& prog = cp.programs[from];
    for (int ch = 0; ch < graph.capacity[from][to]; ++ch) {
      Lane lane;
      lane.channel = ch;
      for (const Move& mv : moves) {
        if (mv.channel != ch) continue;
        Step st;
        st.op = Op::kSend;
        st.sendPeer = to;
        st.src = place.at(mv.chunk, from);
        st.count = 1;
        if (from != in.chunkInfo[mv.chunk].source) {
          auto it = arrival.find({mv.chunk, from});
          if (it == arrival.end() || arrivalStep[{mv.chunk, from}] >= mv.step)
            reject(schedule, "rank " + std::to_string(from) + " forwards chunk " +
                                 std::to_string(mv.chunk) + " in step " +
                                 std::to_string(mv.step) + " before receiving it");
          st.deps.push_back(it->second);
        }
        lane.steps.push_back(st);
      }
      if (!lane.steps.empty()) prog.lanes.push_back(std::move(lane));
    }
  }
  // Every destination must have received its chunks.
  for (size_t k = 0; k < in.chunkInfo.size(); ++k)
    for (int d : in.chunkInfo[k].destinations)
      if (!arrival.count({static_cast<int>(k), d}))
        reject(schedule, "chunk " + std::to_string(k) + " never reaches rank " + std::to_string(d));

  // Local copies of a rank's own pieces into its output, merged into contiguous runs.
  for (int r = 0; r < n; ++r) {
    Lane lane;
    for (const ChunkInfo& c : in.chunkInfo) {
      if (c.source != r || !c.sourceOutput) continue;
      if (!lane.steps.empty()) {
        Step& last = lane.steps.back();
        if (last.src.offset + last.count == c.inputOffset &&
            last.dst.offset + last.count == c.outputOffset) {
          ++last.count;
          continue;
        }
      }
      Step st;
      st.op = Op::kCopy;
      st.src = {plan::kInput, c.inputOffset};
      st.dst = {plan::kOutput, c.outputOffset};
      st.count = 1;
      lane.steps.push_back(st);
    }
    if (!lane.steps.empty()) cp.programs[r].lanes.push_back(std::move(lane));
    cp.programs[r].inputChunks = in.inputChunks;
    cp.programs[r].outputChunks = in.outputChunks;
    cp.programs[r].scratchChunks = place.scratchChunks(r);
  }
  return cp;
}

}  // namespace weft::synth::solver
