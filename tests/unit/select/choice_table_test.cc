// Pins the built-in selector's choice for a grid of calls: every collective, sizes 8 B..1 GiB by
// powers of 2 and a few odd counts, 1..8 and 16 ranks on one host (a core per rank, two ranks per
// core, and this machine's two cores), in and out of place, float32 / int8 / float64, roots at
// either end, several hosts, and a few NCCL_ALGO filters.
//
// tests/unit/select/choice_table.golden is the choice table of the selector before it moved onto
// synth/model (generated once from that code). Weft's measured speed depends on these choices:
// the table changes only together with a benchmark-log entry in perf/README.md that justifies the
// new choice. One change since, not a choice among algorithms: where an NCCL_ALGO filter leaves a
// collective no built-in algorithm and no library plan matches, the call is refused with an error
// that says why ("(refused)"), where it used to run the model's pick regardless of the filter.
// WEFT_SELECT_WRITE_GOLDEN=<path> writes the current table to <path> (the test is then skipped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "src/common/error.h"
#include "src/select/selector.h"

namespace weft::select {
namespace {

using plan::Collective;

constexpr Collective kCollectives[] = {
    Collective::kAllReduce,     Collective::kBroadcast, Collective::kReduce, Collective::kAllGather,
    Collective::kReduceScatter, Collective::kAlltoAll,  Collective::kGather, Collective::kScatter};
constexpr uint32_t kElemSizes[] = {4, 1, 8};  // float32, int8, float64
constexpr uint64_t kOddCounts[] = {1, 3, 7, 1000, 12345, 1000003};

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

// How a communicator would set the selector up.
struct Config {
  int nranks = 1;
  std::vector<int> hostOf;  // empty: one host
  LinkModel net;
  bool sharedCores = false;
  std::vector<int> coreOf;  // empty: unknown
  std::string filter;
};

std::string join(const std::vector<int>& v) {
  if (v.empty()) return "-";
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::string describe(const Config& c) {
  char net[96] = "-";
  if (!c.hostOf.empty())
    std::snprintf(net, sizeof(net), "%.17g/%.17g", c.net.alphaUs, c.net.betaUsPerByte);
  return "n=" + std::to_string(c.nranks) + " hosts=" + join(c.hostOf) + " net=" + net +
         " shared=" + std::to_string(c.sharedCores) + " cores=" + join(c.coreOf) + " filter='" +
         c.filter + "'";
}

// The choice's name, its fan share, and "[hosts]" where it carries the configuration's hosts.
std::string pick(const Selector& s, const Config& config, Collective coll, uint64_t count,
                 uint32_t elem, bool inPlace, int root) {
  plan::Spec spec;
  spec.coll = coll;
  spec.nranks = config.nranks;
  spec.count = count;
  spec.elemSize = elem;
  spec.root = root;
  Choice c;
  try {
    c = s.choose(spec, CallTraits{inPlace, false});
  } catch (const weft::Error&) {
    return "(refused)";  // a filter that allows only plan-library plans, and none matches
  }
  std::string name = c.algorithm.empty() ? "(none)" : c.algorithm;
  if (c.options.pushShare != 0) {
    char share[48];
    std::snprintf(share, sizeof(share), "@%.17g", c.options.pushShare);
    name += share;
  }
  if (!c.options.hostOf.empty())
    name += c.options.hostOf == config.hostOf ? "[hosts]" : "[" + join(c.options.hostOf) + "]";
  return name;
}

// Runs of equal choices: " key:choice" where the choice changes.
class Runs {
 public:
  void add(const std::string& key, const std::string& choice) {
    if (choice != last_) out_ << " " << key << ":" << choice;
    last_ = choice;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::string last_;
};

// A header line per configuration, then one line per (type, placement of buffers, collective,
// root): the choice at each power-of-2 size where it changes, then likewise along the odd counts.
void appendLines(const Config& config, std::vector<std::string>* lines) {
  Selector s(config.nranks, LinkModel{}, AlgoFilter(config.filter));
  if (!config.hostOf.empty()) s.setHosts(config.hostOf, config.net);
  s.setSharedCores(config.sharedCores);
  if (!config.coreOf.empty()) s.setCores(config.coreOf);
  lines->push_back("# " + describe(config));
  for (uint32_t elem : kElemSizes)
    for (bool inPlace : {false, true})
      for (Collective coll : kCollectives) {
        std::vector<int> roots = {0};
        if (rooted(coll) && config.nranks > 1) roots.push_back(config.nranks - 1);
        for (int root : roots) {
          Runs sizes, odd;
          for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 2)
            sizes.add(std::to_string(bytes),
                      pick(s, config, coll, bytes / elem, elem, inPlace, root));
          for (uint64_t count : kOddCounts)
            odd.add(std::to_string(count), pick(s, config, coll, count, elem, inPlace, root));
          lines->push_back("e" + std::to_string(elem) + (inPlace ? " in " : " out ") +
                           plan::collectiveName(coll) + " r" + std::to_string(root) + " |" +
                           sizes.str() + " | counts" + odd.str());
        }
      }
}

std::vector<int> dealt(int nranks, int cores) {
  std::vector<int> coreOf(nranks);
  // As the communicator deals a host's ranks to its cores (coreForSlot).
  for (int r = 0; r < nranks; ++r) coreOf[r] = cores >= nranks ? r * cores / nranks : r % cores;
  return coreOf;
}

std::vector<std::string> choiceTable() {
  std::vector<std::string> lines;
  const int kRanks[] = {1, 2, 3, 4, 5, 6, 7, 8, 16};
  for (int n : kRanks) {
    // A core per rank, two ranks per core, and this machine's two cores (where those differ).
    std::vector<int> coreCounts = {n, (n + 1) / 2};
    if (std::min(n, 2) != coreCounts.back()) coreCounts.push_back(std::min(n, 2));
    for (int cores : coreCounts) {
      Config c;
      c.nranks = n;
      c.sharedCores = n > cores;
      c.coreOf = dealt(n, cores);
      appendLines(c, &lines);
    }
  }
  // Several hosts: WEFT_NET_LATENCY_US / WEFT_NET_GBPS defaults (30 us, 10 Gbit/s), a faster
  // network as the topology may report it, and a slow one.
  LinkModel defaultNet{30.0, 1.0 / (10.0 * 125.0)};
  LinkModel fastNet{30.0, 1.0 / (100.0 * 125.0)};
  LinkModel slowNet{30.0, 1.0 / 125.0};
  const std::vector<std::vector<int>> layouts = {{0, 1},
                                                 {0, 0, 1, 1},
                                                 {0, 1, 0, 1},
                                                 {0, 0, 0, 1},
                                                 {0, 0, 1, 1, 2, 2, 3, 3},
                                                 {0, 0, 0, 0, 1, 1, 1, 1},
                                                 {0, 0, 1, 1, 1},
                                                 {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                                 {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}};
  for (const auto& hostOf : layouts)
    for (const LinkModel& net : {defaultNet, fastNet, slowNet})
      for (bool shared : {false, true}) {
        Config c;
        c.nranks = static_cast<int>(hostOf.size());
        c.hostOf = hostOf;
        c.net = net;
        c.sharedCores = shared;
        c.coreOf = dealt(c.nranks, shared ? 2 : c.nranks);
        appendLines(c, &lines);
      }
  // NCCL_ALGO filters, including ones that exclude everything a collective has.
  for (const char* filter : {"ring", "^direct", "rsag", "allreduce:tree;broadcast:ring", "fan",
                             "hier", "^ring,tree,rhd,direct,rsag,fan,hier", "msccl"})
    for (int n : {2, 4, 8}) {
      Config c;
      c.nranks = n;
      c.filter = filter;
      c.sharedCores = n > 2;
      c.coreOf = dealt(n, 2);
      appendLines(c, &lines);
      if (n == 4) {
        c.hostOf = {0, 0, 1, 1};
        c.net = defaultNet;
        appendLines(c, &lines);
      }
    }
  return lines;
}

TEST(SelectorChoiceTable, MatchesTheChoicesMeasuredSpeedDependsOn) {
  const std::vector<std::string> now = choiceTable();
  if (const char* out = std::getenv("WEFT_SELECT_WRITE_GOLDEN")) {
    std::ofstream file(out);
    for (const auto& l : now) file << l << "\n";
    GTEST_SKIP() << "wrote " << now.size() << " lines to " << out;
  }
  std::ifstream file(WEFT_SOURCE_DIR "/tests/unit/select/choice_table.golden");
  ASSERT_TRUE(file) << "missing tests/unit/select/choice_table.golden";
  std::vector<std::string> golden;
  for (std::string l; std::getline(file, l);) golden.push_back(l);
  ASSERT_EQ(golden.size(), now.size());
  int differ = 0;
  std::string config;
  for (size_t i = 0; i < now.size(); ++i) {
    if (golden[i].rfind("# ", 0) == 0) config = golden[i];
    if (now[i] != golden[i] && ++differ <= 20)
      ADD_FAILURE() << "choice changed (" << config << ")\n  was: " << golden[i]
                    << "\n  now: " << now[i];
  }
  EXPECT_EQ(differ, 0) << "lines whose choices changed";
}

}  // namespace
}  // namespace weft::select
