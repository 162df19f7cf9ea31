#include "synth/solver/lower.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "src/common/error.h"

namespace weft::synth::solver {
namespace {

using plan::Lane;
using plan::Op;
using plan::Ref;
using plan::Step;
using plan::StepRef;

[[noreturn]] void reject(const Schedule& s, const std::string& what) {
  throw Error(Status::kInvalidArgument,
              "lowering " + describe(s.instance.spec) + " schedule (S=" + std::to_string(s.steps) +
                  " R=" + std::to_string(s.rounds) + " C=" + std::to_string(s.instance.chunks) +
                  "): " + what);
}

// One chunk crossing one link: either a copy (the receiver stores it) or a partial sum (the
// receiver adds it to its accumulator). `stage` orders moves globally (reduce-scatter steps come
// before allgather steps in an allreduce).
struct Move {
  int stage = 0;
  int from = 0, to = 0, chunk = 0;
  bool reduce = false;
  int channel = 0;
};

// Builds the per-rank lanes: one per (peer, direction, channel), created on first use, with
// steps appended in the global order of the moves so both ends of a FIFO agree.
class Builder {
 public:
  explicit Builder(plan::ChunkPlan& cp) : cp_(cp) {}

  // Appends a step to rank r's lane towards (send) or from (recv) `peer` on `channel`.
  StepRef append(int r, int peer, bool send, int channel, Step step) {
    auto key = std::make_tuple(r, peer, send, channel);
    auto it = lanes_.find(key);
    plan::ChunkProgram& prog = cp_.programs[r];
    if (it == lanes_.end()) {
      it = lanes_.emplace(key, static_cast<int>(prog.lanes.size())).first;
      Lane lane;
      lane.channel = channel;
      prog.lanes.push_back(lane);
    }
    Lane& lane = prog.lanes[it->second];
    lane.steps.push_back(std::move(step));
    return {it->second, static_cast<int32_t>(lane.steps.size()) - 1};
  }

 private:
  plan::ChunkPlan& cp_;
  std::map<std::tuple<int, int, bool, int>, int> lanes_;
};

// Where chunk data lives. Copies: the source reads its input, destinations their output, relays
// a scratch slot. Partial sums: each rank accumulates into a scratch slot, the chunk's owner into
// its output.
class Placement {
 public:
  Placement(const Instance& in, plan::Collective coll)
      : in_(in), coll_(coll), scratch_(in.nranks) {}

  Ref held(int k, int n) {
    const ChunkInfo& c = in_.chunkInfo[k];
    if (coll_ == plan::Collective::kAllReduce) return {plan::kOutput, c.outputOffset};
    if (n == c.source) return {plan::kInput, c.inputOffset};
    if (std::find(c.destinations.begin(), c.destinations.end(), n) != c.destinations.end())
      return {plan::kOutput, c.outputOffset};
    return slot(k, n);
  }
  // The input element rank n contributes to the sum of chunk k, and where the sum collects.
  Ref contribution(int k) const { return {plan::kInput, static_cast<uint64_t>(k)}; }
  Ref accumulator(int k, int n) {
    const ChunkInfo& c = in_.chunkInfo[k];
    if (n != c.source) return slot(k, n);
    if (coll_ == plan::Collective::kAllReduce) return {plan::kOutput, static_cast<uint64_t>(k)};
    return {plan::kOutput, c.inputOffset};  // reduce-scatter: the owner's piece j
  }
  // A fresh scratch slot on rank n (a parked partial sum).
  Ref extraSlot(int n) { return {plan::kScratch, scratch_[n]++}; }
  uint64_t scratchChunks(int n) const { return scratch_[n]; }

 private:
  Ref slot(int k, int n) {
    auto [it, fresh] = slots_.emplace(std::make_pair(k, n), scratch_[n]);
    if (fresh) ++scratch_[n];
    return {plan::kScratch, it->second};
  }

  const Instance& in_;
  plan::Collective coll_;
  std::vector<uint64_t> scratch_;
  std::map<std::pair<int, int>, uint64_t> slots_;
};

// Orders the moves and deals them over the links' units. Stage by stage, a move goes the earlier
// the sooner its data is complete at the sender (when the last chunk or partial sum it needs
// arrived: stage, then round within the stage), so a lane does not wait on a late chunk while
// ready ones queue behind it. The k-th move of a stage on a link of u units takes channel k % u.
std::vector<Move> dealChannels(const RankGraph& graph, const Schedule& schedule,
                               std::vector<Move> moves) {
  const int n = graph.nranks;
  for (const Move& m : moves)
    if (m.from < 0 || m.from >= n || m.to < 0 || m.to >= n || graph.capacity[m.from][m.to] <= 0)
      reject(schedule, "chunk " + std::to_string(m.chunk) + " crosses " + std::to_string(m.from) +
                           "->" + std::to_string(m.to) + ", which is not a link");
  std::stable_sort(moves.begin(), moves.end(), [](const Move& x, const Move& y) {
    return std::tie(x.stage, x.from, x.to, x.chunk) < std::tie(y.stage, y.from, y.to, y.chunk);
  });
  using Time = std::pair<int, int>;           // (stage, round within it)
  std::map<std::pair<int, int>, Time> ready;  // (chunk, rank) -> when its data is complete there
  std::vector<Move> ordered;
  for (size_t begin = 0; begin < moves.size();) {
    size_t end = begin;
    while (end < moves.size() && moves[end].stage == moves[begin].stage) ++end;
    std::vector<std::pair<Time, Move>> stage;
    for (size_t i = begin; i < end; ++i) {
      auto it = ready.find({moves[i].chunk, moves[i].from});
      stage.push_back({it == ready.end() ? Time{-1, 0} : it->second, moves[i]});
    }
    std::stable_sort(stage.begin(), stage.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::map<std::pair<int, int>, int> used;  // per link: moves dealt in this stage
    for (auto& [when, m] : stage) {
      const int units = graph.capacity[m.from][m.to];
      const int k = used[{m.from, m.to}]++;
      m.channel = k % units;
      Time& t = ready[{m.chunk, m.to}];
      t = std::max(t, Time{m.stage, k / units});
      ordered.push_back(m);
    }
    begin = end;
  }
  return ordered;
}

std::string defaultName(const Schedule& s, plan::Collective coll) {
  return "sccl-" + std::string(plan::collectiveName(coll)) + "-s" + std::to_string(s.steps) + "-r" +
         std::to_string(s.rounds) + "-c" + std::to_string(s.instance.chunks);
}

void checkSends(const Schedule& schedule) {
  for (const ChunkSend& m : schedule.sends)
    if (m.step < 0 || m.step >= schedule.steps || m.chunk < 0 ||
        m.chunk >= static_cast<int>(schedule.instance.chunkInfo.size()))
      reject(schedule,
             "a send names step " + std::to_string(m.step) + " chunk " + std::to_string(m.chunk));
}

// Every send's sender holds the chunk before the step: its source, or it received it earlier.
void checkCausal(const Schedule& schedule) {
  std::map<std::pair<int, int>, int> arrival;
  for (const ChunkSend& m : schedule.sends) {
    auto [it, fresh] = arrival.emplace(std::make_pair(m.chunk, m.to), m.step);
    if (!fresh) it->second = std::min(it->second, m.step);
  }
  for (const ChunkSend& m : schedule.sends) {
    if (m.from == schedule.instance.chunkInfo[m.chunk].source) continue;
    auto it = arrival.find({m.chunk, m.from});
    if (it == arrival.end() || it->second >= m.step)
      reject(schedule, "rank " + std::to_string(m.from) + " forwards chunk " +
                           std::to_string(m.chunk) + " in step " + std::to_string(m.step) +
                           " before receiving it");
  }
}

// Emits copy moves: the receiver stores the chunk, a forwarder waits for its arrival. `ready`
// holds, per (chunk, rank), the step after which the rank holds the chunk's data; the chunk's
// origin needs none unless listed.
void emitCopies(const Schedule& schedule, const std::vector<Move>& moves, Builder& b,
                Placement& place, std::map<std::pair<int, int>, StepRef>& ready) {
  std::map<std::pair<int, int>, int> arrivalStage;
  for (const Move& m : moves) {
    if (m.reduce) continue;
    const int origin = schedule.instance.chunkInfo[m.chunk].source;
    Step send;
    send.op = Op::kSend;
    send.sendPeer = m.to;
    send.src = place.held(m.chunk, m.from);
    send.count = 1;
    auto have = ready.find({m.chunk, m.from});
    if (have != ready.end()) {
      if (m.from != origin && arrivalStage[{m.chunk, m.from}] >= m.stage)
        reject(schedule, "rank " + std::to_string(m.from) + " forwards chunk " +
                             std::to_string(m.chunk) + " in the step it receives it");
      send.deps.push_back(have->second);
    } else if (m.from != origin) {
      reject(schedule, "rank " + std::to_string(m.from) + " forwards chunk " +
                           std::to_string(m.chunk) + " before receiving it");
    }
    if (m.to == origin || arrivalStage.count({m.chunk, m.to}))
      reject(schedule, "chunk " + std::to_string(m.chunk) + " reaches rank " +
                           std::to_string(m.to) + " twice");
    b.append(m.from, m.to, true, m.channel, send);
    Step recv;
    recv.op = Op::kRecv;
    recv.recvPeer = m.from;
    recv.dst = place.held(m.chunk, m.to);
    recv.count = 1;
    ready[{m.chunk, m.to}] = b.append(m.to, m.from, false, m.channel, recv);
    arrivalStage[{m.chunk, m.to}] = m.stage;
  }
}

// Local copies of a rank's own pieces into its output, merged into contiguous runs.
void emitOwnCopies(const Instance& in, plan::ChunkPlan& cp) {
  for (int r = 0; r < in.nranks; ++r) {
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
  }
}

plan::ChunkPlan skeleton(const Schedule& schedule, plan::Collective coll, const std::string& name) {
  const Instance& in = schedule.instance;
  plan::ChunkPlan cp;
  cp.name = name.empty() ? defaultName(schedule, coll) : name;
  cp.coll = coll;
  cp.nranks = in.nranks;
  cp.root = in.spec.root;
  cp.programs.resize(in.nranks);
  return cp;
}

}  // namespace

RankGraph transposed(const RankGraph& graph) {
  RankGraph t = graph;
  for (int a = 0; a < graph.nranks; ++a)
    for (int b = 0; b < graph.nranks; ++b) t.capacity[a][b] = graph.capacity[b][a];
  return t;
}

plan::ChunkPlan lowerToChunkPlan(const RankGraph& graph, const Schedule& schedule,
                                 const std::string& name) {
  const Instance& in = schedule.instance;
  if (graph.nranks != in.nranks)
    reject(schedule, "graph has " + std::to_string(graph.nranks) + " ranks, schedule " +
                         std::to_string(in.nranks));
  checkSends(schedule);
  plan::ChunkPlan cp = skeleton(schedule, in.spec.coll, name);
  cp.chunksPerLoop = in.chunksPerLoop;
  // Alltoall receives into slots of the shared buffer that may not have been sent yet.
  cp.inPlace = in.spec.coll != plan::Collective::kAlltoAll;
  std::vector<Move> moves;
  for (const ChunkSend& m : schedule.sends)
    moves.push_back({m.step, m.from, m.to, m.chunk, false, 0});
  Builder builder(cp);
  Placement place(in, in.spec.coll);
  std::map<std::pair<int, int>, StepRef> ready;
  emitCopies(schedule, dealChannels(graph, schedule, std::move(moves)), builder, place, ready);
  for (size_t k = 0; k < in.chunkInfo.size(); ++k)
    for (int d : in.chunkInfo[k].destinations)
      if (!ready.count({static_cast<int>(k), d}))
        reject(schedule, "chunk " + std::to_string(k) + " never reaches rank " + std::to_string(d));
  emitOwnCopies(in, cp);
  for (int r = 0; r < in.nranks; ++r) {
    cp.programs[r].inputChunks = in.inputChunks;
    cp.programs[r].outputChunks = in.outputChunks;
    cp.programs[r].scratchChunks = place.scratchChunks(r);
  }
  return cp;
}

plan::ChunkPlan lowerCombining(const RankGraph& graph, const Schedule& allgather,
                               plan::Collective coll, const std::string& name) {
  const Instance& in = allgather.instance;
  if (in.spec.coll != plan::Collective::kAllGather)
    reject(allgather, "combining collectives come from an allgather schedule");
  if (coll != plan::Collective::kReduceScatter && coll != plan::Collective::kAllReduce)
    reject(allgather, std::string("no dual for ") + plan::collectiveName(coll));
  if (graph.nranks != in.nranks)
    reject(allgather, "graph has " + std::to_string(graph.nranks) + " ranks, schedule " +
                          std::to_string(in.nranks));
  checkSends(allgather);
  checkCausal(allgather);
  const int n = in.nranks;
  const uint64_t chunks = static_cast<uint64_t>(n) * in.chunks;
  plan::ChunkPlan cp = skeleton(allgather, coll, name);
  cp.chunksPerLoop = chunks;  // reduce-scatter: N*C per N*count; allreduce: N*C per count
  cp.inPlace = true;
  const bool allreduce = coll == plan::Collective::kAllReduce;

  // Reversed moves: allgather step s becomes reduce-scatter stage S-1-s, b->a.
  std::vector<Move> moves;
  for (const ChunkSend& m : allgather.sends)
    moves.push_back({allgather.steps - 1 - m.step, m.to, m.from, m.chunk, true, 0});
  if (allreduce)
    for (const ChunkSend& m : allgather.sends)
      moves.push_back({allgather.steps + m.step, m.from, m.to, m.chunk, false, 0});
  moves = dealChannels(graph, allgather, std::move(moves));

  Builder builder(cp);
  Placement place(in, coll);
  // Contributions each rank receives per chunk: the first is added to the rank's own input as
  // it arrives; the others land in scratch slots and are added once the last one is in, so no
  // receive waits for another lane's.
  std::map<std::pair<int, int>, int> expected, arrived;
  for (const Move& m : moves)
    if (m.reduce) ++expected[{m.chunk, m.to}];
  std::map<std::pair<int, int>, StepRef> lastReduce;  // the step that completes the sum
  std::map<std::pair<int, int>, int> lastStage, sent;
  std::map<std::pair<int, int>, std::vector<std::pair<Ref, StepRef>>> pending;
  // Adds the partial sums parked for `at` (beyond the first) into the accumulator, on rank r's
  // lane (peer, send, channel), each after the receive that brought it.
  auto sumParked = [&](int r, int peer, bool onSend, int channel, std::pair<int, int> at) {
    const auto& parts = pending[at];
    const Ref acc = place.accumulator(at.first, r);
    for (size_t i = 1; i < parts.size(); ++i) {
      Step add;
      add.op = Op::kReduce;
      add.src = parts[i].first;
      add.dst = acc;
      add.count = 1;
      add.deps = {i == 1 ? parts[0].second : lastReduce[at], parts[i].second};
      lastReduce[at] = builder.append(r, peer, onSend, channel, add);
    }
  };
  for (const Move& m : moves) {
    if (!m.reduce) continue;
    const int owner = in.chunkInfo[m.chunk].source;
    if (m.from == owner)
      reject(allgather, "chunk " + std::to_string(m.chunk) + " returns to its source");
    if (sent[{m.chunk, m.from}]++)
      reject(allgather, "chunk " + std::to_string(m.chunk) + " reaches rank " +
                            std::to_string(m.from) + " twice");
    // The sender passes on its partial sum: its accumulator, or its own input if nothing came in.
    Step send;
    send.op = Op::kSend;
    send.sendPeer = m.to;
    send.count = 1;
    if (expected.count({m.chunk, m.from})) {
      const std::pair<int, int> mine{m.chunk, m.from};
      if (arrived[mine] != expected[mine] || lastStage[mine] >= m.stage)
        reject(allgather, "rank " + std::to_string(m.from) + " passes on chunk " +
                              std::to_string(m.chunk) + " before its children's sums arrive");
      // Add the parked partial sums on this lane, just before passing the total on.
      sumParked(m.from, m.to, true, m.channel, mine);
      send.src = place.accumulator(m.chunk, m.from);
      send.deps.push_back(lastReduce[mine]);
    } else {
      send.src = place.contribution(m.chunk);
    }
    builder.append(m.from, m.to, true, m.channel, send);

    const std::pair<int, int> at{m.chunk, m.to};
    const Ref acc = place.accumulator(m.chunk, m.to);
    Step recv;
    recv.recvPeer = m.from;
    recv.count = 1;
    StepRef here;
    if (arrived[at]++ == 0) {
      recv.op = Op::kRecvReduceCopy;  // acc = own input + incoming
      recv.src = place.contribution(m.chunk);
      recv.dst = acc;
      here = builder.append(m.to, m.from, false, m.channel, recv);
      pending[at].push_back({acc, here});
    } else {
      recv.op = Op::kRecv;
      recv.dst = place.extraSlot(m.to);
      here = builder.append(m.to, m.from, false, m.channel, recv);
      pending[at].push_back({recv.dst, here});
    }
    lastReduce[at] = here;
    lastStage[at] = m.stage;
    // The owner adds its parked partial sums once the last one is in, on a lane of its own: on a
    // receive lane they would hold up the receives queued behind them.
    if (m.to == owner && arrived[at] == expected[at]) sumParked(m.to, -1, false, 0, at);
  }
  for (int k = 0; k < static_cast<int>(chunks); ++k) {
    const int owner = in.chunkInfo[k].source;
    for (int r = 0; r < n; ++r)
      if (r != owner && !sent.count({k, r}))
        reject(allgather,
               "rank " + std::to_string(r) + " never contributes to chunk " + std::to_string(k));
  }
  if (allreduce) {
    // The allgather starts from each owner's finished sum.
    std::map<std::pair<int, int>, StepRef> ready;
    for (int k = 0; k < static_cast<int>(chunks); ++k)
      ready[{k, in.chunkInfo[k].source}] = lastReduce.at({k, in.chunkInfo[k].source});
    emitCopies(allgather, moves, builder, place, ready);
    for (int k = 0; k < static_cast<int>(chunks); ++k)
      for (int d : in.chunkInfo[k].destinations)
        if (!ready.count({k, d}))
          reject(allgather,
                 "chunk " + std::to_string(k) + " never reaches rank " + std::to_string(d));
  }
  for (int r = 0; r < n; ++r) {
    cp.programs[r].inputChunks = chunks;
    cp.programs[r].outputChunks = allreduce ? chunks : in.chunks;
    cp.programs[r].scratchChunks = place.scratchChunks(r);
  }
  return cp;
}

}  // namespace weft::synth::solver
