#include "synth/tools/plan_output.h"

#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include "src/plan/plan.h"

namespace weft::synth {

uint64_t smallestCount(const plan::ChunkPlan& plan) {
  const uint64_t mult = plan::sizeMultiplier(plan.coll, plan.nranks);
  const uint64_t per = std::max<uint64_t>(plan.chunksPerLoop, 1);
  return per / std::gcd(per, mult);
}

std::string planText(const plan::ChunkPlan& plan) {
  std::ostringstream out;
  size_t lanes = 0, steps = 0;
  for (const auto& prog : plan.programs) {
    lanes += prog.lanes.size();
    for (const auto& lane : prog.lanes) steps += lane.steps.size();
  }
  const uint64_t count = smallestCount(plan);
  out << "# " << plan.name << ": " << plan::collectiveName(plan.coll) << " on " << plan.nranks
      << " ranks, " << plan.chunksPerLoop << " chunks per loop, " << lanes << " lanes, " << steps
      << " steps\n# instantiated at count " << count
      << " (one element per chunk: offsets are chunk indices)\n";
  out << plan::toText(plan::instantiate(plan, count));
  return out.str();
}

std::string planDot(const plan::ChunkPlan& plan, const Fabric& fabric) {
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  // (from, to, channel) -> chunks sent
  std::map<std::tuple<int, int, int>, uint64_t> edges;
  for (int r = 0; r < static_cast<int>(plan.programs.size()); ++r)
    for (const auto& lane : plan.programs[r].lanes)
      for (const auto& st : lane.steps)
        if (plan::opSends(st.op)) edges[{r, st.sendPeer, lane.channel}] += st.count;
  std::ostringstream out;
  out << "digraph \"" << plan.name << "\" {\n  node [shape=box, style=rounded];\n"
      << "  label=\"" << plan.name << " (" << plan::collectiveName(plan.coll)
      << "): edges are sends, label = chunks of " << plan.chunksPerLoop
      << " per loop, colour = channel\";\n";
  for (int r = 0; r < plan.nranks; ++r)
    out << "  r" << r << " [label=\"rank " << r
        << (r < fabric.nodeCount() ? "\\n" + fabric.nodes[r].name : std::string()) << "\"];\n";
  for (const auto& [key, chunks] : edges) {
    const auto [from, to, channel] = key;
    out << "  r" << from << " -> r" << to << " [label=\"" << chunks << "\", color=\""
        << kColours[channel % 10] << "\", fontcolor=\"" << kColours[channel % 10] << "\"];\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace weft::synth
