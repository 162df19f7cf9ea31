#include "synth/auto/synthesize.h"

#include <chrono>
#include <cmath>
#include <map>

#include "algorithms/registry.h"
#include "src/common/error.h"
#include "synth/pack/pack_plan.h"
#include "synth/search/ring_plan.h"
#include "synth/search/ring_search.h"
#include "synth/search/tree_search.h"

namespace weft::synth {

using plan::Collective;

const char* methodName(Method m) {
  switch (m) {
    case Method::kRing:
      return "ring";
    case Method::kTree:
      return "tree";
    case Method::kPack:
      return "pack";
  }
  return "?";
}

bool parseMethod(const std::string& name, Method* m) {
  for (Method k : {Method::kRing, Method::kTree, Method::kPack})
    if (name == methodName(k)) {
      *m = k;
      return true;
    }
  return false;
}

plan::ChunkPlan synthesize(Method method, Collective coll, const Fabric& fabric, int root,
                           uint64_t chooseBytes) {
  plan::ChunkPlan cp;
  switch (method) {
    case Method::kRing: {
      RingPlanOptions options;
      options.root = root;
      cp = ringPlan(coll, searchRings(fabric), options);
      break;
    }
    case Method::kTree:
      if (coll != Collective::kAllReduce)
        throw Error(Status::kInvalidArgument,
                    std::string("synthesis method tree has no plan for ") +
                        plan::collectiveName(coll) + " (allreduce only)");
      cp = treePlan(coll, searchTrees(fabric));
      break;
    case Method::kPack: {
      PackPlanOptions options;
      options.chooseBytes = chooseBytes;
      cp = packPlan(coll, fabric, root, options);
      break;
    }
  }
  cp.name = std::string("synth-") + methodName(method) + "-" + plan::collectiveName(coll) + "-" +
            std::to_string(fabric.nranks);
  return cp;
}

plan::Plan builtinPlan(const std::string& name, Collective coll, int nranks, uint64_t bytes,
                       int root) {
  plan::Spec spec;
  spec.coll = coll;
  spec.nranks = nranks;
  spec.root = root;
  spec.elemSize = 4;
  spec.count = countForBytes(coll, nranks, bytes, spec.elemSize);
  algo::Options options;
  options.sliceElems = SimOptions{}.sliceBytes / spec.elemSize;  // as a communicator slices
  return algo::build(name, spec, options);
}

namespace {

uint64_t geometricMid(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>(std::sqrt(static_cast<double>(a) * static_cast<double>(b)));
}

}  // namespace

std::vector<SelectedPlan> selectPlans(const Fabric& fabric, const SelectionOptions& options,
                                      std::vector<std::string>* skipped) {
  std::vector<SelectedPlan> out;
  const auto& sizes = options.sizes;
  const auto t0 = std::chrono::steady_clock::now();
  for (Collective coll : options.colls) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (options.budgetSeconds > 0 && spent > options.budgetSeconds) {
      if (skipped)
        skipped->push_back("time budget of " + std::to_string(options.budgetSeconds) +
                           " s spent before " + plan::collectiveName(coll));
      break;
    }
    struct Candidate {
      Method method;
      plan::ChunkPlan plan;
    };
    std::vector<Candidate> candidates;
    for (Method m : options.methods) {
      if (m == Method::kTree && coll != Collective::kAllReduce) continue;
      try {
        candidates.push_back({m, synthesize(m, coll, fabric)});
      } catch (const std::exception& e) {
        if (skipped)
          skipped->push_back(std::string(methodName(m)) + " " + plan::collectiveName(coll) + ": " +
                             e.what());
      }
    }
    // winner[i]: the candidate that wins sizes[i], or -1.
    std::vector<int> winner(sizes.size(), -1);
    std::vector<double> winnerUs(sizes.size(), 0), ringUs(sizes.size(), 0);
    for (size_t i = 0; i < sizes.size(); ++i) {
      ringUs[i] =
          simulate(builtinPlan("ring", coll, fabric.nranks, sizes[i]), fabric, options.sim).timeUs;
      double best = ringUs[i] * (1 - options.minGain);
      for (size_t c = 0; c < candidates.size(); ++c) {
        double us;
        try {
          us = simulate(candidates[c].plan, sizes[i], fabric, options.sim).timeUs;
        } catch (const std::exception& e) {
          continue;  // a plan the simulator refuses (deadlock at this size) never wins it
        }
        if (us < best) {
          best = us;
          winner[i] = static_cast<int>(c);
          winnerUs[i] = us;
        }
      }
    }
    for (size_t i = 0; i < sizes.size();) {
      if (winner[i] < 0) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j + 1 < sizes.size() && winner[j + 1] == winner[i]) ++j;
      SelectedPlan s;
      s.method = methodName(candidates[winner[i]].method);
      s.plan = candidates[winner[i]].plan;
      s.plan.minBytes = i == 0 ? sizes[0] : geometricMid(sizes[i - 1], sizes[i]);
      s.plan.maxBytes = j + 1 == sizes.size() ? 0 : geometricMid(sizes[j], sizes[j + 1]) - 1;
      s.predictedUs = winnerUs[i];
      s.ringUs = ringUs[i];
      out.push_back(std::move(s));
      i = j + 1;
    }
  }
  return out;
}

}  // namespace weft::synth
