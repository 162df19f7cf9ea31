// weft-synth-exact: exact synthesis (SCCL's steps/rounds/chunks with Z3) from the command line.
//
//   weft-synth-exact --topology tests/golden/topologies/dgx1-v100.xml solve 3 7 6 --verify 48
//   weft-synth-exact --topology tests/golden/topologies/dgx1-v100.xml pareto --max-chunks 6
//   weft-synth-exact --matrix "0,1,1;1,0,1;1,1,0" --coll broadcast --root 1 solve 1 1 1
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/plan/verifier.h"
#include "src/topo/xml_reader.h"
#include "synth/model/simulator.h"
#include "synth/solver/lower.h"
#include "synth/solver/solver.h"

namespace {

using namespace weft::synth::solver;

const char* kUsage =
    "usage: weft-synth-exact (--topology FILE [--gpus 0,1,..] | --matrix ROWS) [options] COMMAND\n"
    "  --topology FILE     NCCL topology XML; its direct GPU links form the rank graph\n"
    "  --gpus LIST         GPUs that are ranks (default: all)\n"
    "  --matrix ROWS       link units as rows 'a,b,..;c,d,..' (row: from, column: to)\n"
    "  --coll NAME         allgather (default), alltoall, broadcast, or reducescatter and\n"
    "                      allreduce (from an allgather schedule by duality)\n"
    "  --root R            broadcast root (default 0)\n"
    "  --timeout SEC       per solver call (default 30)\n"
    "  --verify COUNT      lower each schedule found to a plan and verify it at this count\n"
    "                      (or the next one that splits into whole chunks)\n"
    "  --print             print each schedule found\n"
    "  --simulate BYTES    predict each plan's time at this message size (allgather: output\n"
    "                      bytes) with the synth/model simulator (needs --topology)\n"
    "commands:\n"
    "  bounds              the step and rounds-per-chunk lower bounds\n"
    "  solve S R C         one instance: S steps, R rounds, C chunks\n"
    "  pareto [--max-chunks N] [--max-steps N] [--max-extra-rounds N]\n"
    "                      SCCL's Pareto-Synthesize walk\n";

std::vector<int> parseList(const std::string& text, char sep) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep))
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

int number(const char* text, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!end || *end != '\0')
    throw weft::Error(weft::Status::kInvalidArgument,
                      std::string("weft-synth-exact: ") + what + " '" + text + "' is not a number");
  return static_cast<int>(v);
}

struct Args {
  std::string topology, matrix, gpus, command;
  CollectiveSpec spec;
  std::optional<weft::plan::Collective> combining;  // lowered from the allgather by duality
  double timeout = 30;
  long verifyCount = 0;
  std::vector<uint64_t> simulateBytes;
  std::optional<weft::synth::Fabric> fabric;
  RankGraph baseGraph;  // the machine's graph (the solver sees its transpose for reducescatter)
  bool print = false;
  std::vector<int> positional;
  ParetoOptions pareto;
};

void report(const RankGraph& graph, const Schedule& schedule, const Args& args) {
  // Lowering, verification and simulation of one schedule, as the options ask.
  if (args.print) std::cout << schedule.describe();
  if (args.verifyCount <= 0 && args.simulateBytes.empty()) return;
  const weft::plan::ChunkPlan cp = args.combining
                                       ? lowerCombining(args.baseGraph, schedule, *args.combining)
                                       : lowerToChunkPlan(graph, schedule);
  if (args.verifyCount > 0) {
    // The next count at or above the one asked for that splits into whole chunks.
    uint64_t count = static_cast<uint64_t>(args.verifyCount);
    while (weft::plan::chunkElems(cp, count) == 0) ++count;
    weft::plan::verify(weft::plan::instantiate(cp, count));
    std::cout << "  plan " << cp.name << " verified at count " << count << "\n";
  }
  for (uint64_t bytes : args.simulateBytes) {
    if (!args.fabric)
      throw weft::Error(weft::Status::kInvalidArgument,
                        "weft-synth-exact: --simulate needs --topology");
    const double us = weft::synth::simulate(cp, bytes, *args.fabric).timeUs;
    std::cout << "  plan " << cp.name << " at " << bytes << " B: " << us << " us (simulated)\n";
  }
}

int run(int argc, char** argv) {
  Args args;
  args.pareto.timeoutSec = args.timeout;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc)
        throw weft::Error(weft::Status::kInvalidArgument,
                          "weft-synth-exact: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--topology") {
      args.topology = value();
    } else if (a == "--gpus") {
      args.gpus = value();
    } else if (a == "--matrix") {
      args.matrix = value();
    } else if (a == "--coll") {
      const std::string c = value();
      if (c == "allgather")
        args.spec.coll = weft::plan::Collective::kAllGather;
      else if (c == "alltoall")
        args.spec.coll = weft::plan::Collective::kAlltoAll;
      else if (c == "broadcast")
        args.spec.coll = weft::plan::Collective::kBroadcast;
      else if (c == "reducescatter")
        args.combining = weft::plan::Collective::kReduceScatter;
      else if (c == "allreduce")
        args.combining = weft::plan::Collective::kAllReduce;
      else
        throw weft::Error(weft::Status::kInvalidArgument,
                          "weft-synth-exact: unknown collective '" + c + "'");
    } else if (a == "--root") {
      args.spec.root = number(value(), "root");
    } else if (a == "--timeout") {
      args.timeout = std::atof(value());
    } else if (a == "--verify") {
      args.verifyCount = number(value(), "count");
    } else if (a == "--simulate") {
      args.simulateBytes.push_back(std::stoull(value()));
    } else if (a == "--print") {
      args.print = true;
    } else if (a == "--max-chunks") {
      args.pareto.maxChunks = number(value(), "max chunks");
    } else if (a == "--max-steps") {
      args.pareto.maxSteps = number(value(), "max steps");
    } else if (a == "--max-extra-rounds") {
      args.pareto.maxExtraRounds = number(value(), "max extra rounds");
    } else if (args.command.empty()) {
      args.command = a;
    } else {
      args.positional.push_back(number(argv[i], "argument"));
    }
  }
  args.pareto.timeoutSec = args.timeout;
  if (args.topology.empty() == args.matrix.empty() || args.command.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  RankGraph graph;
  if (!args.topology.empty()) {
    weft::synth::FabricOptions fo;
    if (!args.gpus.empty()) fo.gpus = parseList(args.gpus, ',');
    args.fabric = weft::synth::fabricFromTopology(weft::topo::readTopologyFile(args.topology), fo);
    graph = rankGraphFromFabric(*args.fabric, 0, args.topology);
  } else {
    std::vector<std::vector<int>> rows;
    std::stringstream in(args.matrix);
    std::string row;
    while (std::getline(in, row, ';')) rows.push_back(parseList(row, ','));
    graph = rankGraphFromMatrix(rows, "matrix");
  }
  args.baseGraph = graph;
  if (args.combining == weft::plan::Collective::kReduceScatter) graph = transposed(graph);
  std::cout << graph.describe();
  if (args.combining)
    std::cout << "solving allgather schedules to lower to "
              << weft::plan::collectiveName(*args.combining) << "\n";
  std::cout << describe(args.spec) << ": steps >= " << stepsLowerBound(graph, args.spec)
            << ", rounds per chunk >= " << roundsPerChunkLowerBound(graph, args.spec).text()
            << "\n";
  if (args.command == "bounds") return 0;
  if (args.command == "solve") {
    if (args.positional.size() != 3) {
      std::cerr << kUsage;
      return 2;
    }
    const SolveResult r = solveInstance(graph, args.spec, args.positional[0], args.positional[1],
                                        args.positional[2], args.timeout);
    std::cout << "S=" << args.positional[0] << " R=" << args.positional[1]
              << " C=" << args.positional[2] << ": " << solveStatusName(r.status)
              << (r.symmetric ? " (symmetric search)" : "") << " in " << r.seconds << " s"
              << (r.reason.empty() ? "" : " (" + r.reason + ")") << "\n";
    if (r.schedule) report(graph, *r.schedule, args);
    return r.status == SolveStatus::kSat ? 0 : 1;
  }
  if (args.command == "pareto") {
    const ParetoResult p = paretoFrontier(graph, args.spec, args.pareto);
    for (const ParetoAttempt& t : p.attempts)
      std::cout << "  S=" << t.steps << " R=" << t.rounds << " C=" << t.chunks << ": "
                << solveStatusName(t.status) << " in " << t.seconds << " s\n";
    std::cout << "frontier (" << (p.bandwidthOptimal ? "reaches" : "does not reach")
              << " the bandwidth bound):\n";
    for (const ParetoPoint& pt : p.points) {
      const Schedule& s = pt.schedule;
      std::cout << "  S=" << s.steps << " R=" << s.rounds << " C=" << s.instance.chunks << ": cost "
                << s.steps << " alpha + " << s.rounds << "/" << s.instance.chunks
                << " L beta, found in " << pt.seconds << " s\n";
      report(graph, s, args);
    }
    return 0;
  }
  std::cerr << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "weft-synth-exact: " << e.what() << "\n";
    return 1;
  }
}
