#include "algorithms/tree/tree.h"

#include <algorithm>
#include <utility>

#include "algorithms/common/builder.h"

namespace weft::algo {
namespace {

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

// A lane of one rank in a tree, with the rank's parent and children there; reduceUp and
// broadcastDown add the rank's steps for one slice [x, x + len).
struct TreeLane {
  Program& p;
  int lane;
  int par;  // -1 at the root
  const std::vector<int>& kids;
  StepRef add(Step s) { return addStep(p, lane, std::move(s)); }

  // Reduces the subtree's inputs up towards the root, which writes its output. A rank with two
  // children keeps the first child's partial sum in `partial` (not at the root). Returns the
  // last step (at the root: the one that completes the sum).
  StepRef reduceUp(uint64_t x, uint64_t len, Ref partial) {
    if (par < 0) {
      StepRef done = add(recvReduceCopyStep(kids[0], inRef(x), outRef(x), len));
      if (kids.size() > 1) done = add(recvReduceStep(kids[1], outRef(x), len));
      return done;
    }
    if (kids.empty()) return add(sendStep(par, inRef(x), len));
    if (kids.size() == 1) return add(recvReduceSendStep(kids[0], par, inRef(x), len));
    add(recvReduceCopyStep(kids[0], inRef(x), partial, len));
    return add(recvReduceSendStep(kids[1], par, partial, len));
  }

  // Broadcasts the root's `rootSrc` down into every other rank's output; `rootDeps` gate the
  // root's first send.
  void broadcastDown(uint64_t x, uint64_t len, Ref rootSrc, std::vector<StepRef> rootDeps) {
    if (par < 0) {
      for (size_t i = 0; i < kids.size(); ++i) {
        Step s = sendStep(kids[i], rootSrc, len);
        if (i == 0) s.deps = std::move(rootDeps);
        add(std::move(s));
      }
    } else if (kids.empty()) {
      add(recvStep(par, outRef(x), len));
    } else {
      add(recvCopySendStep(par, kids[0], outRef(x), len));
      if (kids.size() > 1) add(sendStep(kids[1], outRef(x), len));
    }
  }
};

// Allreduce: each tree of the double tree owns half of every channel part; lanes up (reduce
// toward the root) and down (broadcast from it) per tree, on channel 2 * part + tree, so a rank
// that is a parent in one tree and a child in the other never shares a FIFO between them.
Plan allReduce(const Spec& spec, const Options& o) {
  const uint64_t align = alignElems(spec), slice = sliceElems(spec, o);
  const auto trees = doubleBinaryTree(spec.nranks);
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "tree", [&](Program& p, int r) {
    for (const ChannelPart& part : parts) {
      const auto halves = splitEven(part.len(), 2, align);
      for (int t = 0; t < 2; ++t) {
        const uint64_t h0 = part.begin + halves[t], h1 = part.begin + halves[t + 1];
        if (h0 == h1) continue;
        const int channel = 2 * part.channel + t;
        TreeLane up{p, addLane(p, channel), trees[t].parent[r], trees[t].children[r]};
        TreeLane down{p, addLane(p, channel), up.par, up.kids};
        forEachSlice(h0, h1, slice, [&](uint64_t x, uint64_t len) {
          const StepRef reduced = up.reduceUp(x, len, outRef(x));
          down.broadcastDown(x, len, outRef(x), {reduced});
        });
      }
    }
  });
}

Plan broadcast(const Spec& spec, const Options& o) {
  const TreeShape tree = rootedBinaryTree(spec.nranks, spec.root);
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "tree", [&](Program& p, int r) {
    if (r == spec.root) addStep(p, addLane(p, 0), copyStep(inRef(0), outRef(0), spec.count));
    forEachPartSlice(p, parts, sliceElems(spec, o), [&](int lane, uint64_t x, uint64_t len) {
      TreeLane{p, lane, tree.parent[r], tree.children[r]}.broadcastDown(x, len, inRef(x), {});
    });
  });
}

// Non-root ranks never touch their output (NCCL needs no receive buffer there): a rank with two
// children keeps the first child's partial sum in scratch, a slice per lane.
Plan reduce(const Spec& spec, const Options& o) {
  const uint64_t slice = sliceElems(spec, o);
  const TreeShape tree = rootedBinaryTree(spec.nranks, spec.root);
  const auto parts = channelParts(spec, o);
  return eachRank(spec, "tree", [&](Program& p, int r) {
    forEachPartSlice(p, parts, slice, [&](int lane, uint64_t x, uint64_t len) {
      const uint64_t tmp = p.lanes[lane].channel * slice;  // this lane's scratch slice
      TreeLane{p, lane, tree.parent[r], tree.children[r]}.reduceUp(x, len, scratchRef(tmp));
      if (tree.parent[r] >= 0 && tree.children[r].size() > 1)
        p.scratchElems = std::max(p.scratchElems, tmp + len);
    });
  });
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
  return buildCollective("tree", spec, options,
                         {{Collective::kAllReduce, allReduce},
                          {Collective::kBroadcast, broadcast},
                          {Collective::kReduce, reduce}});
}

}  // namespace weft::algo
