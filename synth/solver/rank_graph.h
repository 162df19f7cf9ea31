// The rank graph exact synthesis works on: ranks joined by direct links, each with a
// multiplicity (how many chunks it carries per round, SCCL's bandwidth units). Only one-hop links
// belong here; traffic that a fabric relays through switches or other GPUs is not modelled.
#pragma once
#include <string>
#include <vector>

#include "synth/model/fabric.h"

namespace weft::synth::solver {

struct RankGraph {
  int nranks = 0;
  // capacity[a][b]: link units from a to b (0: no direct link). The diagonal is 0.
  std::vector<std::vector<int>> capacity;
  std::string name;

  // Directed links (a, b) with capacity > 0, in row-major order.
  struct Link {
    int from = -1, to = -1, units = 0;
  };
  std::vector<Link> links() const;
  // Shortest-path hop counts over the links (-1: unreachable).
  std::vector<std::vector<int>> hops() const;
  // Largest hop count between two ranks; throws when some rank cannot reach another.
  int diameter() const;
  // Sum of the units of the links entering / leaving rank r.
  int unitsIn(int r) const;
  int unitsOut(int r) const;
  std::string describe() const;
};

// From a square matrix of link units (rows: from, columns: to). Throws weft::Error naming the
// bad entry on a non-square matrix, a negative entry or a self link.
RankGraph rankGraphFromMatrix(const std::vector<std::vector<int>>& units,
                              const std::string& name = "matrix");

// The direct links of a fabric: rank pairs whose route is a single link. A link's units are its
// bandwidth divided by `unitGBps` (rounded to the nearest integer, at least 1); unitGBps <= 0
// takes the slowest direct link as the unit (DGX-1: one NVLink2 = 25 GB/s, so double links
// count 2). Throws when no pair of ranks is directly linked.
RankGraph rankGraphFromFabric(const Fabric& fabric, double unitGBps = 0,
                              const std::string& name = "fabric");

}  // namespace weft::synth::solver
