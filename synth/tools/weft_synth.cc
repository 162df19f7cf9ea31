// weft-synth: synthesizes a collective for a machine described by NCCL topology XML, writes it as
// MSCCL XML (and a readable dump, and a Graphviz picture), and prints per message size the
// predicted time against the lower bound and the ring and tree baselines.
//
//   weft-synth --topo tests/golden/topologies/dgx1-v100.xml --coll allgather --out /tmp/ag
//   weft-synth --topo dgx1.xml --coll allreduce --gpus 0,1,2,4,5 --method pack --sizes 1M:1G
//   weft-synth --topo build-vm.xml --ranks 4 --coll reducescatter --sizes 1G
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "src/plan/msccl_xml.h"
#include "src/topo/xml_reader.h"
#include "synth/auto/synthesize.h"
#include "synth/model/bounds.h"
#include "synth/model/simulator.h"
#include "synth/tools/plan_output.h"
#ifdef WEFT_SYNTH_HAVE_Z3
#include "synth/solver/lower.h"
#include "synth/solver/solver.h"
#endif

namespace {

using weft::Error;
using weft::Status;
using weft::plan::Collective;
namespace synth = weft::synth;

const char* kUsage =
    "usage: weft-synth --topo FILE --coll NAME [options]\n"
    "  --topo FILE        NCCL topology XML of the machine\n"
    "  --coll NAME        allgather, reducescatter, allreduce, broadcast or reduce\n"
    "  --sizes A:B[:F]    message sizes from A to B, times F each row (default 1K:1G:4); or one\n"
    "                     size. Suffixes K, M, G (powers of 1024). nccl-tests' bytes: allgather\n"
    "                     = output, reducescatter = input, others = the buffer\n"
    "  --method NAME      ring, tree (allreduce), pack, exact (Z3 builds), or best (default):\n"
    "                     the lowest simulated time at the largest size among ring, tree, pack\n"
    "                     (pack picks its job layout and allreduce shape at that size too)\n"
    "  --gpus LIST        GPUs that are ranks, e.g. 0,1,3 (default: all)\n"
    "  --ranks N          machines without GPUs: N host ranks per host\n"
    "  --root R           root of broadcast / reduce (default 0)\n"
    "  --rates NAME       link rates: nominal (default) or nccl\n"
    "  --out PREFIX       write PREFIX.xml (MSCCL XML) and PREFIX.txt (readable plan)\n"
    "  --dot FILE         write a Graphviz picture of the plan\n"
    "  --timeout SEC      exact: per solver call (default 30)\n"
    "  --choose SIZE      compare the methods and tune pack at SIZE (default: the largest size)\n";

[[noreturn]] void usageError(const std::string& message) {
  throw Error(Status::kInvalidArgument, message);
}

uint64_t parseBytes(const std::string& text) {
  if (text.empty()) usageError("empty size");
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    usageError("size '" + text + "' is not a number");
  }
  uint64_t mult = 1;
  const std::string suffix = text.substr(pos);
  if (suffix == "K" || suffix == "k")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    mult = 1ull << 30;
  else if (!suffix.empty())
    usageError("size '" + text + "' has an unknown suffix");
  if (v == 0) usageError("size '" + text + "' must be positive");
  return v * mult;
}

std::vector<uint64_t> parseSizes(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string p;
  while (std::getline(in, p, ':')) parts.push_back(p);
  if (parts.empty() || parts.size() > 3) usageError("--sizes '" + text + "' is not A:B[:F]");
  const uint64_t lo = parseBytes(parts[0]);
  const uint64_t hi = parts.size() > 1 ? parseBytes(parts[1]) : lo;
  uint64_t factor = 4;
  if (parts.size() == 3) {
    char* end = nullptr;
    factor = std::strtoull(parts[2].c_str(), &end, 10);
    if (!end || *end || factor < 2) usageError("--sizes factor '" + parts[2] + "' must be >= 2");
  }
  if (hi < lo) usageError("--sizes '" + text + "': the largest size is below the smallest");
  std::vector<uint64_t> sizes;
  for (uint64_t s = lo; s <= hi; s *= factor) {
    sizes.push_back(s);
    if (s > hi / factor) break;
  }
  if (sizes.back() != hi) sizes.push_back(hi);
  return sizes;
}

std::vector<int> parseGpus(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || !end || *end || v < 0)
      usageError("--gpus '" + text + "': '" + item + "' is not a GPU index");
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) usageError("--gpus '" + text + "' lists no GPU");
  return out;
}

int parseInt(const std::string& text, const std::string& what) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || !end || *end) usageError(what + " '" + text + "' is not a number");
  return static_cast<int>(v);
}

Collective parseColl(const std::string& name) {
  for (Collective c : {Collective::kAllGather, Collective::kReduceScatter, Collective::kAllReduce,
                       Collective::kBroadcast, Collective::kReduce})
    if (name == weft::plan::collectiveName(c)) return c;
  usageError("unknown collective '" + name +
             "' (allgather, reducescatter, allreduce, broadcast, reduce)");
}

std::string human(uint64_t bytes) {
  const char* units[] = {"B", "K", "M", "G"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 3 && std::fmod(v, 1024) == 0) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  out << v << units[u];
  return out.str();
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error(Status::kSystemError, "cannot write " + path);
}

#ifdef WEFT_SYNTH_HAVE_Z3
// SCCL-style exact synthesis: the bandwidth-best point of the Pareto walk, lowered (reduce-scatter
// and allreduce from the allgather by duality).
weft::plan::ChunkPlan exactPlan(Collective coll, const synth::Fabric& fabric, int root,
                                double timeout) {
  namespace solver = synth::solver;
  const solver::RankGraph graph = solver::rankGraphFromFabric(fabric);
  solver::CollectiveSpec spec;
  spec.coll = coll == Collective::kBroadcast ? Collective::kBroadcast : Collective::kAllGather;
  spec.root = root;
  if (coll != Collective::kAllGather && coll != Collective::kBroadcast &&
      coll != Collective::kReduceScatter && coll != Collective::kAllReduce)
    usageError(std::string("method exact has no plan for ") + weft::plan::collectiveName(coll));
  const solver::RankGraph solved =
      coll == Collective::kReduceScatter ? solver::transposed(graph) : graph;
  solver::ParetoOptions options;
  options.timeoutSec = timeout;
  const solver::ParetoResult frontier = solver::paretoFrontier(solved, spec, options);
  if (frontier.points.empty())
    throw Error(Status::kInvalidArgument, "exact synthesis found no schedule within the limits");
  const solver::Schedule& s = frontier.points.back().schedule;
  weft::plan::ChunkPlan cp = (coll == Collective::kReduceScatter || coll == Collective::kAllReduce)
                                 ? solver::lowerCombining(graph, s, coll)
                                 : solver::lowerToChunkPlan(solved, s);
  cp.name = std::string("synth-exact-") + weft::plan::collectiveName(coll) + "-" +
            std::to_string(fabric.nranks);
  return cp;
}
#endif

struct Args {
  std::string topo, gpus, method = "best", out, dot, rates = "nominal";
  std::optional<Collective> coll;
  std::vector<uint64_t> sizes = parseSizes("1K:1G");
  int ranks = 0, root = 0;
  double timeout = 30;
  uint64_t choose = 0;  // size the methods are compared and pack tuned at; 0: the largest size
};

Args parseArgs(int argc, char** argv, bool* help) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usageError(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "-h" || flag == "--help")
      *help = true;
    else if (flag == "--topo")
      a.topo = value();
    else if (flag == "--coll")
      a.coll = parseColl(value());
    else if (flag == "--sizes")
      a.sizes = parseSizes(value());
    else if (flag == "--method")
      a.method = value();
    else if (flag == "--gpus")
      a.gpus = value();
    else if (flag == "--ranks")
      a.ranks = parseInt(value(), "--ranks");
    else if (flag == "--root")
      a.root = parseInt(value(), "--root");
    else if (flag == "--rates")
      a.rates = value();
    else if (flag == "--out")
      a.out = value();
    else if (flag == "--dot")
      a.dot = value();
    else if (flag == "--timeout")
      a.timeout = std::atof(value().c_str());
    else if (flag == "--choose")
      a.choose = parseBytes(value());
    else
      usageError("unknown argument '" + flag + "'");
  }
  if (*help) return a;
  if (a.topo.empty()) usageError("--topo FILE is required");
  if (!a.coll) usageError("--coll NAME is required");
  if (a.method != "best" && a.method != "exact") {
    synth::Method m;
    if (!synth::parseMethod(a.method, &m))
      usageError("unknown method '" + a.method + "' (ring, tree, pack, exact, best)");
  }
  if (a.ranks < 0) usageError("--ranks must be positive");
  return a;
}

int run(int argc, char** argv) {
  bool help = false;
  const Args args = parseArgs(argc, argv, &help);
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  const Collective coll = *args.coll;
  weft::topo::XmlReadOptions xo;
  xo.rates = weft::topo::LinkRates::byName(args.rates);
  const weft::topo::Topology topology = weft::topo::readTopologyFile(args.topo, xo);
  const bool hasGpus = !topology.find(weft::topo::NodeKind::kGpu).empty();
  if (args.ranks > 0 && hasGpus)
    usageError("--ranks is for machines without GPUs; " + args.topo + " has GPUs (use --gpus)");
  if (!args.gpus.empty() && !hasGpus)
    usageError("--gpus: " + args.topo + " has no GPUs (use --ranks for host ranks)");
  synth::FabricOptions fo;
  if (!args.gpus.empty()) fo.gpus = parseGpus(args.gpus);
  if (args.ranks > 0) fo.hostRanksPerHost = args.ranks;
  const synth::Fabric fabric = synth::fabricFromTopology(topology, fo);
  if (fabric.nranks < 2) usageError("the fabric has " + std::to_string(fabric.nranks) + " rank");
  if (args.root < 0 || args.root >= fabric.nranks)
    usageError("--root " + std::to_string(args.root) + " is not a rank of " +
               std::to_string(fabric.nranks));
  synth::FabricOptions all = fo;
  all.allLinks = true;
  const synth::Fabric machine = synth::fabricFromTopology(topology, all);
  const int n = fabric.nranks;
  // Methods race (and pack tunes its pieces) at one size: --choose, else the largest.
  const uint64_t chooseAt = args.choose ? args.choose : args.sizes.back();
  std::cout << "# weft-synth " << weft::plan::collectiveName(coll) << " on " << args.topo << ": "
            << n << " ranks";
  if (!args.gpus.empty()) std::cout << " (gpus " << args.gpus << ")";
  std::cout << "\n";

  // Synthesis: one method, or every method and the fastest at the size chosen at.
  std::vector<std::string> methods;
  if (args.method == "best") {
    methods = {"ring", "pack"};
    if (coll == Collective::kAllReduce) methods.insert(methods.begin() + 1, "tree");
  } else {
    methods = {args.method};
  }
  weft::plan::ChunkPlan chosen;
  std::string chosenMethod;
  double chosenSeconds = 0, chosenUs = std::numeric_limits<double>::infinity();
  const auto tAll = std::chrono::steady_clock::now();
  for (const std::string& m : methods) {
    const auto t0 = std::chrono::steady_clock::now();
    weft::plan::ChunkPlan cp;
    try {
      if (m == "exact") {
#ifdef WEFT_SYNTH_HAVE_Z3
        cp = exactPlan(coll, fabric, args.root, args.timeout);
#else
        usageError("method exact needs exact synthesis, which this build lacks (Z3 was not found)");
#endif
      } else {
        synth::Method method;
        synth::parseMethod(m, &method);
        cp = synth::synthesize(method, coll, fabric, args.root, chooseAt);
      }
    } catch (const Error& e) {
      if (methods.size() == 1) throw;
      std::cout << "# method " << m << ": " << e.what() << "\n";
      continue;
    }
    const double seconds = secondsSince(t0);
    const double us = synth::simulate(cp, chooseAt, fabric).timeUs;
    if (methods.size() > 1)
      std::cout << "# method " << m << ": " << us << " us at " << human(chooseAt) << ", synthesis "
                << seconds << " s\n";
    if (us < chosenUs) {
      chosen = std::move(cp);
      chosenMethod = m;
      chosenSeconds = seconds;
      chosenUs = us;
    }
  }
  if (chosenMethod.empty()) throw Error(Status::kInvalidArgument, "no method synthesized a plan");
  std::cout << "# plan " << chosen.name << " (method " << chosenMethod
            << "): " << chosen.chunksPerLoop << " chunks per loop; synthesis " << chosenSeconds
            << " s, with the choice " << secondsSince(tAll) << " s\n";
  const synth::Bound machineBound = synth::lowerBound(coll, machine, chooseAt, args.root);
  std::cout << "# bound: " << synth::lowerBound(coll, fabric, chooseAt, args.root).describe()
            << "\n# machine bound (every physical link): " << machineBound.describe() << "\n";

  if (!args.out.empty()) {
    writeFile(args.out + ".xml", weft::plan::exportMsccl(chosen));
    writeFile(args.out + ".txt", synth::planText(chosen));
    std::cout << "# wrote " << args.out << ".xml and " << args.out << ".txt\n";
  }
  if (!args.dot.empty()) {
    writeFile(args.dot, synth::planDot(chosen, fabric));
    std::cout << "# wrote " << args.dot << "\n";
  }

  // Baselines: the searched rings, and the built-in tree (allreduce, broadcast, reduce).
  std::optional<weft::plan::ChunkPlan> ring;
  if (chosenMethod != "ring") {
    try {
      ring = synth::synthesize(synth::Method::kRing, coll, fabric, args.root);
    } catch (const Error& e) {
      std::cout << "# ring baseline: " << e.what() << "\n";
    }
  }
  const bool treeBaseline = weft::algo::supports("tree", coll);
  const double busFactor = synth::busBwFactor(coll, n);
  std::printf("#%12s %12s %9s %9s %12s %7s %12s %7s %12s\n", "size(B)", "synth(us)", "algbw",
              "busbw", "bound(us)", "ratio", "ring(us)", "x ring", "tree(us)");
  for (uint64_t bytes : args.sizes) {
    const double us = synth::simulate(chosen, bytes, fabric).timeUs;
    const synth::Bound bound = synth::lowerBound(coll, fabric, bytes, args.root);
    const double ringUs = ring ? synth::simulate(*ring, bytes, fabric).timeUs : us;
    const double algbw = static_cast<double>(bytes) / us / 1e3;
    std::printf(" %12llu %12.2f %9.2f %9.2f %12.2f %7.4f %12.2f %7.3f",
                static_cast<unsigned long long>(bytes), us, algbw, algbw * busFactor, bound.timeUs,
                bound.timeUs / us, ringUs, ringUs / us);
    if (treeBaseline)
      std::printf(
          " %12.2f\n",
          synth::simulate(synth::builtinPlan("tree", coll, n, bytes, args.root), fabric).timeUs);
    else
      std::printf(" %12s\n", "-");
  }
  std::cout << "# ratio = bound / synth (1 = at the bound); x ring = ring / synth (> 1: faster "
               "than the searched rings)\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "weft-synth: " << e.what() << "\n";
    return 2;
  }
}
