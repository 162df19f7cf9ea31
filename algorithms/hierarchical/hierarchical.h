// Hierarchical collectives for ranks spread over hosts: the data is reduced (or gathered) inside
// each host to the host's leader (its lowest rank) over the fast local links, the leaders run a
// ring among themselves over the network, and each leader hands the result back inside its host.
// The network then carries the minimum a host must send and receive (2(H-1)/H of the data for an
// allreduce over H hosts, against 2(P-1)/P for a flat ring over P ranks). The three phases run
// on their own lanes (channel 0 up to the leader, 1 down from it, 2 and 3 two leader rings taking
// rounds in turn) and are pipelined chunk by chunk.
#pragma once
#include <vector>

#include "algorithms/common/options.h"
#include "src/plan/plan.h"

namespace weft::algo {

// Ranks grouped by host, hosts in order of their lowest rank; members in rank order.
struct HostLayout {
  std::vector<std::vector<int>> members;  // [host][local index] -> rank
  std::vector<int> host;                  // rank -> host index
  std::vector<int> local;                 // rank -> local index
  int maxLocal() const;
};
// From Options::hostOf (any labels); an empty or wrongly sized list means one host.
HostLayout hostLayout(int nranks, const std::vector<int>& hostOf);

// allreduce, allgather, reducescatter.
plan::Plan buildHierarchical(const plan::Spec& spec, const Options& options);

}  // namespace weft::algo
