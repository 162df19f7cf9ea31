// Fabrics and plans shared by the cost-model, simulator and bounds tests.
#pragma once
#include <string>
#include <vector>

#include "src/plan/plan.h"
#include "src/topo/xml_reader.h"
#include "synth/model/fabric.h"

namespace weft::synth::testing {

inline topo::Topology golden(const std::string& name) {
  return topo::readTopologyFile(std::string(WEFT_SOURCE_DIR) + "/tests/golden/topologies/" + name);
}

inline Fabric goldenFabric(const std::string& name) { return fabricFromTopology(golden(name)); }

// Ranks 0..n-1 on a line: links only between neighbours (bw GB/s, latency us each way); a route
// walks the line.
inline Fabric chainFabric(int n, double bw, double latencyUs) {
  Fabric f;
  f.nranks = n;
  for (int r = 0; r < n; ++r) {
    f.nodes.push_back({"rank" + std::to_string(r), topo::NodeKind::kGpu, 0, -1});
    f.hostOf.push_back(0);
  }
  for (int r = 0; r + 1 < n; ++r) {
    f.links.push_back({r, r + 1, bw, latencyUs, topo::LinkKind::kNvLink});  // link 2r
    f.links.push_back({r + 1, r, bw, latencyUs, topo::LinkKind::kNvLink});  // link 2r+1
  }
  f.routes.assign(n, std::vector<std::vector<int>>(n));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a < b)
        for (int r = a; r < b; ++r) f.routes[a][b].push_back(2 * r);
      else
        for (int r = a; r > b; --r) f.routes[a][b].push_back(2 * (r - 1) + 1);
    }
  return f;
}

// Ranks 0..n-1 each joined to one switch node by links of `bw` GB/s each way.
inline Fabric starFabric(int n, double bw, double latencyUs) {
  Fabric f;
  f.nranks = n;
  for (int r = 0; r < n; ++r) {
    f.nodes.push_back({"rank" + std::to_string(r), topo::NodeKind::kGpu, 0, -1});
    f.hostOf.push_back(0);
  }
  f.nodes.push_back({"switch", topo::NodeKind::kNvSwitch, 0, -1});
  for (int r = 0; r < n; ++r) {
    f.links.push_back({r, n, bw, latencyUs / 2, topo::LinkKind::kNvLink});  // link 2r: up
    f.links.push_back({n, r, bw, latencyUs / 2, topo::LinkKind::kNvLink});  // link 2r+1: down
  }
  f.routes.assign(n, std::vector<std::vector<int>>(n));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) f.routes[a][b] = {2 * a, 2 * b + 1};
  return f;
}

// A point-to-point plan skeleton for `n` ranks (sendrecv).
inline plan::Plan p2pPlan(int n) {
  plan::Plan p;
  p.algorithm = "test";
  p.spec.coll = plan::Collective::kSendRecv;
  p.spec.nranks = n;
  p.spec.elemSize = 1;
  p.programs.resize(n);
  return p;
}

inline plan::Step sendTo(int peer, uint64_t count) {
  plan::Step s;
  s.op = plan::Op::kSend;
  s.sendPeer = peer;
  s.count = count;
  return s;
}

inline plan::Step recvFrom(int peer, uint64_t count) {
  plan::Step s;
  s.op = plan::Op::kRecv;
  s.recvPeer = peer;
  s.count = count;
  s.dst = {plan::kOutput, 0};
  return s;
}

// Adds a lane on `channel` holding `steps` to rank r's program.
inline void addLane(plan::Plan& p, int r, int channel, std::vector<plan::Step> steps) {
  plan::Lane lane;
  lane.channel = channel;
  lane.steps = std::move(steps);
  p.programs[r].lanes.push_back(std::move(lane));
}

}  // namespace weft::synth::testing
