// Which RDMA device and port this process uses (NCCL_IB_HCA), which GID on a RoCE port
// (NCCL_IB_GID_INDEX or chosen), and the device contexts, opened once per process.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "transports/ib/verbs.h"

namespace weft::ib {

// NCCL_IB_HCA: "[^][=]name[:port][,name[:port]...]". `^` excludes the listed devices instead of
// keeping only them; `=` matches names exactly instead of as prefixes (mlx5 matches mlx5_0).
struct HcaFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;  // empty: every device
};
HcaFilter parseHcaFilter(const std::string& spec);
bool hcaAllowed(const HcaFilter& f, const std::string& device, int port);

// A GID table entry as sysfs shows it: the GID text and its type ("IB/RoCE v1", "RoCE v2").
struct GidEntry {
  int index = 0;
  std::string gid;   // "0000:0000:0000:0000:0000:ffff:c612:0001"
  std::string type;  // "RoCE v2"
};
// The GID a RoCE port uses when NCCL_IB_GID_INDEX is not set: the RoCE v2 GID of an IPv4
// address (routable, present as soon as the address is), else the first RoCE v2 GID, else the
// first non-zero one; -1 if the table has none.
int chooseGid(const std::vector<GidEntry>& table);

// An opened device port ready for queue pairs.
struct Port {
  std::string device;
  int port = 1;
  bool ethernet = false;  // RoCE (addressed by GID) rather than InfiniBand (by LID)
  int gidIndex = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;
  ibv_context* context = nullptr;  // owned by the process's device table, never closed
  ibv_pd* pd = nullptr;
};

// The first active port allowed by `hcaSpec`, opened (a process keeps each device open once
// opened). gidIndex < 0 chooses the GID. Returns false and *why when there is none.
bool openPort(const std::string& hcaSpec, int gidIndex, Port* out, std::string* why);

}  // namespace weft::ib
