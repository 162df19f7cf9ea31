#include "synth/model/sim_plan_index.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "src/common/error.h"

namespace weft::synth::sim {

using plan::Op;
using plan::Step;

const char* waitName(Wait w) {
  switch (w) {
    case Wait::kLane:
      return "lane";
    case Wait::kDependency:
      return "dependency";
    case Wait::kData:
      return "data";
    case Wait::kSlot:
      return "slot";
    default:
      return "";
  }
}

std::string stepText(int rank, int lane, int step, const Step& s) {
  std::ostringstream out;
  out << "rank " << rank << " lane " << lane << " step " << step << " (" << plan::opName(s.op);
  if (plan::opRecvs(s.op)) out << " from rank " << s.recvPeer;
  if (plan::opSends(s.op)) out << " to rank " << s.sendPeer;
  out << ", " << s.count << " elements)";
  return out.str();
}

std::string PlanIndex::describe(int g) const {
  const StepInfo& s = steps[g];
  return stepText(lanes[s.lane].rank, lanes[s.lane].lane, s.index, *s.step);
}

void rejectPlan(const plan::Plan& plan, const std::string& msg) {
  throw Error(Status::kInvalidArgument, "simulate " + plan.algorithm + ": " + msg);
}

PlanIndex indexPlan(const plan::Plan& plan, const Fabric& fabric, const SimOptions& options) {
  PlanIndex ix;
  const int n = plan.spec.nranks;
  if (n != fabric.nranks)
    rejectPlan(plan, "plan has " + std::to_string(n) + " ranks but the fabric has " +
                         std::to_string(fabric.nranks));
  if (static_cast<int>(plan.programs.size()) != n)
    rejectPlan(plan, "plan has " + std::to_string(plan.programs.size()) + " programs for " +
                         std::to_string(n) + " ranks");
  bool routesOk = static_cast<int>(fabric.routes.size()) == n;
  for (const auto& row : fabric.routes) routesOk &= static_cast<int>(row.size()) == n;
  for (const auto& row : fabric.routes)
    for (const auto& route : row)
      for (int l : route) routesOk &= l >= 0 && l < static_cast<int>(fabric.links.size());
  if (!routesOk)
    rejectPlan(plan, "the fabric's routes are not an nranks x nranks table of its links");
  const uint64_t elem = std::max<uint32_t>(1, plan.spec.elemSize);
  const uint64_t slice = std::max<uint64_t>(1, options.sliceBytes);
  const uint64_t maxSlices = std::max<uint64_t>(1, options.maxSlicesPerStep);
  std::map<std::tuple<int, int, int>, int> fifoIds;
  auto fifoId = [&](int from, int to, int channel) {
    auto [it, fresh] = fifoIds.emplace(std::make_tuple(from, to, channel), ix.fifos.size());
    if (fresh) {
      Fifo f;
      f.from = from;
      f.to = to;
      f.channel = channel;
      f.route = &fabric.routes[from][to];
      f.latencyUs = fabric.routeLatencyUs(from, to);
      if (from != to && f.route->empty())
        rejectPlan(plan, "the fabric has no route from rank " + std::to_string(from) + " to rank " +
                             std::to_string(to));
      for (int l : *f.route)
        if (!(fabric.links[l].bw > 0))
          rejectPlan(plan, "fabric link " + fabric.nodes[fabric.links[l].from].name + " -> " +
                               fabric.nodes[fabric.links[l].to].name + " has no bandwidth");
      ix.fifos.push_back(f);
    }
    return it->second;
  };
  for (int r = 0; r < n; ++r) {
    const plan::Program& p = plan.programs[r];
    ix.laneBase.push_back(static_cast<int>(ix.lanes.size()));
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      LaneState L;
      L.rank = r;
      L.lane = static_cast<int>(l);
      L.firstStep = static_cast<int>(ix.steps.size());
      L.steps = static_cast<int>(p.lanes[l].steps.size());
      const int channel = p.lanes[l].channel;
      L.weight = options.laneShares ? std::max<uint32_t>(1, p.lanes[l].share) : 1;
      ix.weighted |= L.weight != 1;
      if (channel < 0)
        rejectPlan(plan, "rank " + std::to_string(r) + " lane " + std::to_string(l) +
                             " has channel " + std::to_string(channel));
      for (size_t s = 0; s < p.lanes[l].steps.size(); ++s) {
        const Step& st = p.lanes[l].steps[s];
        StepInfo info;
        info.step = &st;
        info.lane = static_cast<int>(ix.lanes.size());
        info.index = static_cast<int>(s);
        auto where = [&] { return stepText(r, static_cast<int>(l), static_cast<int>(s), st); };
        if (static_cast<int>(st.op) > static_cast<int>(Op::kReduce))
          rejectPlan(plan, where() + ": bad op");
        if (plan::opSends(st.op)) {
          if (st.sendPeer < 0 || st.sendPeer >= n)
            rejectPlan(plan, where() + ": send peer out of range");
          info.sendFifo = fifoId(r, st.sendPeer, plan::sendChannelOf(p.lanes[l]));
        }
        if (plan::opRecvs(st.op)) {
          if (st.recvPeer < 0 || st.recvPeer >= n)
            rejectPlan(plan, where() + ": receive peer out of range");
          info.recvFifo = fifoId(st.recvPeer, r, channel);
        }
        for (const plan::StepRef& d : st.deps)
          if (d.lane < 0 || d.lane >= static_cast<int>(p.lanes.size()) || d.step < 0 ||
              d.step >= static_cast<int>(p.lanes[d.lane].steps.size()))
            rejectPlan(plan, where() + ": dependency on lane " + std::to_string(d.lane) + " step " +
                                 std::to_string(d.step) + " that does not exist");
        info.bytes = st.count * elem;
        info.nslices = std::max<uint64_t>(1, (info.bytes + slice - 1) / slice);
        info.nslices = std::min(info.nslices, maxSlices);
        ix.steps.push_back(std::move(info));
      }
      ix.lanes.push_back(L);
    }
  }
  // Receives and sends pair up per FIFO; a count mismatch can never complete.
  std::vector<int> sends(ix.fifos.size()), recvs(ix.fifos.size()), lastSend(ix.fifos.size(), -1),
      lastRecv(ix.fifos.size(), -1);
  for (size_t g = 0; g < ix.steps.size(); ++g) {
    if (ix.steps[g].sendFifo >= 0)
      ++sends[ix.steps[g].sendFifo], lastSend[ix.steps[g].sendFifo] = g;
    if (ix.steps[g].recvFifo >= 0)
      ++recvs[ix.steps[g].recvFifo], lastRecv[ix.steps[g].recvFifo] = g;
  }
  for (size_t i = 0; i < ix.fifos.size(); ++i) {
    const Fifo& f = ix.fifos[i];
    const std::string counts =
        "rank " + std::to_string(f.from) + " sends " + std::to_string(sends[i]) +
        " messages to rank " + std::to_string(f.to) + " on channel " + std::to_string(f.channel) +
        ", rank " + std::to_string(f.to) + " receives " + std::to_string(recvs[i]);
    if (recvs[i] > sends[i])
      rejectPlan(plan, ix.describe(lastRecv[i]) + " has no matching send: " + counts);
    if (sends[i] > recvs[i])
      rejectPlan(plan, ix.describe(lastSend[i]) + " has no matching receive: " + counts);
  }
  return ix;
}

}  // namespace weft::synth::sim
