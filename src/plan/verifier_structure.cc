// The plan verifier's structural checks: what needs no simulation (shapes, peers, bounds,
// dependencies and their cycles).
#include <vector>

#include "src/plan/verifier_internal.h"

namespace weft::plan::detail {
namespace {

bool hasRoot(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

bool validOp(Op op) { return static_cast<int>(op) <= static_cast<int>(Op::kReduce); }

// Element count of a rank's buffer, or false if the buffer does not exist.
bool bufferLimit(const Plan& plan, int rank, uint16_t buffer, uint64_t* size) {
  const Program& p = plan.programs[rank];
  BufferSizes sizes = bufferSizes(plan.spec, rank);
  if (buffer == kInput)
    *size = sizes.input;
  else if (buffer == kOutput)
    *size = sizes.output;
  else if (buffer == kScratch)
    *size = p.scratchElems;
  else if (buffer - kExtra < static_cast<int>(p.extraElems.size()))
    *size = p.extraElems[buffer - kExtra];
  else
    return false;
  return true;
}

}  // namespace

// Well-formedness that needs no simulation: shapes, peers, bounds, dependencies.
void checkStructure(const Plan& plan) {
  const Spec& spec = plan.spec;
  const int n = spec.nranks;
  if (n < 1) reject("spec.nranks is " + std::to_string(n));
  if (static_cast<int>(plan.programs.size()) != n)
    reject("plan has " + std::to_string(plan.programs.size()) + " programs for " +
           std::to_string(n) + " ranks");
  if (hasRoot(spec.coll) && (spec.root < 0 || spec.root >= n))
    reject("root " + std::to_string(spec.root) + " is not a rank");
  for (int r = 0; r < n; ++r) {
    const Program& p = plan.programs[r];
    size_t total = 0;
    std::vector<size_t> laneStart;
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      laneStart.push_back(total);
      total += p.lanes[l].steps.size();
      if (p.lanes[l].channel < 0 || p.lanes[l].sendChannel < -1)
        reject("rank " + std::to_string(r) + " lane " + std::to_string(l) + " has channel " +
               std::to_string(p.lanes[l].channel) + " / send channel " +
               std::to_string(p.lanes[l].sendChannel));
    }
    // Indegrees over lane order plus explicit deps, for Kahn's cycle check below.
    std::vector<int> indeg(total, 0);
    std::vector<std::vector<size_t>> succ(total);
    for (size_t l = 0; l < p.lanes.size(); ++l) {
      const auto& steps = p.lanes[l].steps;
      for (size_t s = 0; s < steps.size(); ++s) {
        const Step& st = steps[s];
        auto here = [&] { return stepText(r, l, s, st); };
        if (!validOp(st.op)) reject(here() + ": unknown op");
        if (opSends(st.op) && (st.sendPeer < 0 || st.sendPeer >= n || st.sendPeer == r))
          reject(here() + ": bad send peer " + std::to_string(st.sendPeer));
        if (opRecvs(st.op) && (st.recvPeer < 0 || st.recvPeer >= n || st.recvPeer == r))
          reject(here() + ": bad receive peer " + std::to_string(st.recvPeer));
        auto checkRef = [&](const Ref& ref, const char* what) {
          uint64_t size = 0;
          if (!bufferLimit(plan, r, ref.buffer, &size))
            reject(here() + ": " + what + " names unknown buffer " + std::to_string(ref.buffer));
          if (ref.offset > size || st.count > size - ref.offset)
            reject(here() + ": " + what + " " + bufferText(ref.buffer) + "[" +
                   std::to_string(ref.offset) + ", " + std::to_string(ref.offset + st.count) +
                   ") is out of bounds (" + bufferText(ref.buffer) + " has " +
                   std::to_string(size) + " elements)");
        };
        if (opReadsSrc(st.op)) checkRef(st.src, "src");
        if (opWritesDst(st.op)) {
          checkRef(st.dst, "dst");
          if (st.dst.buffer == kInput && plan.outOfPlaceSafe)
            reject(here() + ": writes the input buffer (the user's send buffer is read-only)");
        }
        size_t id = laneStart[l] + s;
        if (s > 0) {
          succ[id - 1].push_back(id);
          ++indeg[id];
        }
        for (const StepRef& d : st.deps) {
          if (d.lane < 0 || d.lane >= static_cast<int>(p.lanes.size()) || d.step < 0 ||
              d.step >= static_cast<int>(p.lanes[d.lane].steps.size()))
            reject(here() + ": depends on missing step " + std::to_string(d.lane) + "." +
                   std::to_string(d.step));
          succ[laneStart[d.lane] + d.step].push_back(id);
          ++indeg[id];
        }
      }
    }
    std::vector<size_t> ready;
    for (size_t i = 0; i < total; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    size_t seen = 0;
    while (!ready.empty()) {
      size_t i = ready.back();
      ready.pop_back();
      ++seen;
      for (size_t j : succ[i])
        if (--indeg[j] == 0) ready.push_back(j);
    }
    if (seen != total) {
      for (size_t l = 0; l < p.lanes.size(); ++l)
        for (size_t s = 0; s < p.lanes[l].steps.size(); ++s)
          if (indeg[laneStart[l] + s] > 0)
            reject(stepText(r, l, s, p.lanes[l].steps[s]) + ": dependency cycle");
    }
  }
}

}  // namespace weft::plan::detail
