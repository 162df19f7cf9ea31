#include "algorithms/tree/tree.h"

#include <algorithm>
#include <string>

#include "algorithms/common/builder.h"
#include "src/common/error.h"

namespace weft::algo {
namespace {

using plan::Collective;
using plan::Plan;
using plan::Program;
using plan::Spec;
using plan::StepRef;

TreeShape fromParents(std::vector<int> parent) {
  TreeShape t;
  const int n = parent.size();
  t.children.resize(n);
  for (int r = 0; r < n; ++r) {
    if (parent[r] < 0)
      t.root = r;
    else
      t.children[parent[r]].push_back(r);
  }
  for (auto& c : t.children) std::sort(c.begin(), c.end());
  t.parent = std::move(parent);
  return t;
}

TreeShape relabel(const TreeShape& t, int n, int (*map)(int, int, int), int arg) {
  std::vector<int> parent(n, -1);
  for (int r = 0; r < n; ++r)
    if (t.parent[r] >= 0) parent[map(r, n, arg)] = map(t.parent[r], n, arg);
  return fromParents(std::move(parent));
}

// Allreduce: each tree of the double tree owns half of every channel part; lanes up (reduce
// toward the root) and down (broadcast from it) per tree, on channel 2 * part + tree, so a rank
// that is a parent in one tree and a child in the other never shares a FIFO between them.
Plan allReduce(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "tree");
  const int n = spec.nranks;
  const uint64_t align = alignElems(spec), slice = sliceElems(spec, o);
  const auto trees = doubleBinaryTree(n);
  const auto parts = splitEven(spec.count, o.channels, align);
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    for (int c = 0; c < o.channels; ++c) {
      const auto halves = splitEven(parts[c + 1] - parts[c], 2, align);
      for (int t = 0; t < 2; ++t) {
        const uint64_t h0 = parts[c] + halves[t], h1 = parts[c] + halves[t + 1];
        if (h0 == h1) continue;
        const int par = trees[t].parent[r];
        const auto& kids = trees[t].children[r];
        const int up = addLane(p, 2 * c + t), down = addLane(p, 2 * c + t);
        for (uint64_t x = h0; x < h1; x += slice) {
          const uint64_t len = std::min(slice, h1 - x);
          StepRef reduced{};
          if (par < 0) {
            reduced = addStep(p, up, recvReduceCopyStep(kids[0], inRef(x), outRef(x), len));
            if (kids.size() > 1) reduced = addStep(p, up, recvReduceStep(kids[1], outRef(x), len));
          } else if (kids.empty()) {
            addStep(p, up, sendStep(par, inRef(x), len));
          } else if (kids.size() == 1) {
            addStep(p, up, recvReduceSendStep(kids[0], par, inRef(x), len));
          } else {
            addStep(p, up, recvReduceCopyStep(kids[0], inRef(x), outRef(x), len));
            addStep(p, up, recvReduceSendStep(kids[1], par, outRef(x), len));
          }
          if (par < 0) {
            for (size_t i = 0; i < kids.size(); ++i) {
              plan::Step s = sendStep(kids[i], outRef(x), len);
              if (i == 0) s.deps.push_back(reduced);
              addStep(p, down, std::move(s));
            }
          } else if (kids.empty()) {
            addStep(p, down, recvStep(par, outRef(x), len));
          } else {
            addStep(p, down, recvCopySendStep(par, kids[0], outRef(x), len));
            if (kids.size() > 1) addStep(p, down, sendStep(kids[1], outRef(x), len));
          }
        }
      }
    }
  }
  return plan;
}

Plan broadcast(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "tree");
  const int n = spec.nranks;
  const uint64_t slice = sliceElems(spec, o);
  const TreeShape tree = rootedBinaryTree(n, spec.root);
  const auto parts = splitEven(spec.count, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int par = tree.parent[r];
    const auto& kids = tree.children[r];
    if (par < 0) addStep(p, addLane(p, 0), copyStep(inRef(0), outRef(0), spec.count));
    for (int c = 0; c < o.channels; ++c) {
      if (parts[c] == parts[c + 1]) continue;
      const int lane = addLane(p, c);
      for (uint64_t x = parts[c]; x < parts[c + 1]; x += slice) {
        const uint64_t len = std::min(slice, parts[c + 1] - x);
        if (par < 0) {
          for (int kid : kids) addStep(p, lane, sendStep(kid, inRef(x), len));
        } else if (kids.empty()) {
          addStep(p, lane, recvStep(par, outRef(x), len));
        } else {
          addStep(p, lane, recvCopySendStep(par, kids[0], outRef(x), len));
          if (kids.size() > 1) addStep(p, lane, sendStep(kids[1], outRef(x), len));
        }
      }
    }
  }
  return plan;
}

// Non-root ranks never touch their output (NCCL needs no receive buffer there): a rank with two
// children keeps the first child's partial sum in scratch.
Plan reduce(const Spec& spec, const Options& o) {
  Plan plan = emptyPlan(spec, "tree");
  const int n = spec.nranks;
  const uint64_t slice = sliceElems(spec, o);
  const TreeShape tree = rootedBinaryTree(n, spec.root);
  const auto parts = splitEven(spec.count, o.channels, alignElems(spec));
  for (int r = 0; r < n; ++r) {
    Program& p = plan.programs[r];
    const int par = tree.parent[r];
    const auto& kids = tree.children[r];
    for (int c = 0; c < o.channels; ++c) {
      if (parts[c] == parts[c + 1]) continue;
      const int lane = addLane(p, c);
      const uint64_t tmp = c * slice;  // this lane's scratch chunk
      for (uint64_t x = parts[c]; x < parts[c + 1]; x += slice) {
        const uint64_t len = std::min(slice, parts[c + 1] - x);
        if (par < 0) {
          addStep(p, lane, recvReduceCopyStep(kids[0], inRef(x), outRef(x), len));
          if (kids.size() > 1) addStep(p, lane, recvReduceStep(kids[1], outRef(x), len));
        } else if (kids.empty()) {
          addStep(p, lane, sendStep(par, inRef(x), len));
        } else if (kids.size() == 1) {
          addStep(p, lane, recvReduceSendStep(kids[0], par, inRef(x), len));
        } else {
          addStep(p, lane, recvReduceCopyStep(kids[0], inRef(x), scratchRef(tmp), len));
          addStep(p, lane, recvReduceSendStep(kids[1], par, scratchRef(tmp), len));
          p.scratchElems = std::max(p.scratchElems, tmp + len);
        }
      }
    }
  }
  return plan;
}

}  // namespace

TreeShape binaryTree(int n) {
  std::vector<int> parent(n, -1);
  for (int r = 1; r < n; ++r) {
    const int bit = r & -r;  // lowest set bit
    int up = (r ^ bit) | (bit << 1);
    if (up >= n) up = r ^ bit;
    parent[r] = up;
  }
  return fromParents(std::move(parent));
}

TreeShape rootedBinaryTree(int n, int root) {
  return relabel(
      binaryTree(n), n, [](int r, int n, int root) { return (r + root) % n; }, root);
}

std::array<TreeShape, 2> doubleBinaryTree(int n) {
  TreeShape first = binaryTree(n);
  TreeShape second = n % 2 ? relabel(
                                 first, n, [](int r, int n, int) { return (r + 1) % n; }, 0)
                           : relabel(
                                 first, n, [](int r, int n, int) { return n - 1 - r; }, 0);
  return {std::move(first), std::move(second)};
}

Plan buildTree(const Spec& spec, const Options& options) {
  checkSpec(spec, options);
  Plan plan;
  if (trivialPlan(spec, "tree", &plan)) return plan;
  switch (spec.coll) {
    case Collective::kAllReduce:
      return allReduce(spec, options);
    case Collective::kBroadcast:
      return broadcast(spec, options);
    case Collective::kReduce:
      return reduce(spec, options);
    default:
      break;
  }
  throw Error(Status::kInvalidArgument,
              std::string("tree does not implement ") + plan::collectiveName(spec.coll));
}

}  // namespace weft::algo
