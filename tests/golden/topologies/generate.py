#!/usr/bin/env python3
"""Writes the reference machines of tests/golden/topologies as NCCL topology XML.

Run from this directory: python3 generate.py. The files are checked in; this script documents
how they were made and regenerates them identically. Bus ids are illustrative (real machines
differ per board revision); the structure, counts and link rates are what the tests rely on.

Link rates, and where they come from (the reader turns counts and speeds into GB/s per
direction; see src/topo/bandwidth.h):
  NVLink2 (V100) 25 GB/s per link per direction: NVIDIA Tesla V100 whitepaper (WP-08608-001,
    "six NVLinks ... 300 GB/s" bidirectional); NCCL models 20 (src/graph/topo.h SM70_NVLINK_BW).
  NVLink3 (A100) 25 GB/s per link, 12 links = 300 GB/s: NVIDIA A100 Tensor Core GPU Architecture
    whitepaper (600 GB/s bidirectional); NCCL models 20 (SM80_NVLINK_BW).
  NVLink4 (H100) 25 GB/s per link, 18 links = 450 GB/s: NVIDIA H100 Tensor Core GPU Architecture
    whitepaper (900 GB/s bidirectional); NCCL models 20.6 (SM90_NVLINK_BW).
  PCIe from link_speed x link_width with NCCL's model (src/graph/topo.cc kvDictPciGen, width *
    speed / 80): gen3 x16 "8.0 GT/s" = 12 GB/s, gen4 x16 "16.0 GT/s" = 24, gen5 x16 "32.0 GT/s" = 48.
  Networks from <net speed> in Mbit/s / 8000: EDR 100 Gb/s = 12.5 GB/s, HDR 200 Gb/s = 25,
    NDR 400 Gb/s = 50 (InfiniBand Trade Association roadmap; NCCL topo.cc ncclTopoAddNet).
  CPU interconnect from the <cpu> vendor/family/model (NCCL topo.h): Broadwell QPI 6 GB/s,
    Skylake UPI 10, Sapphire Rapids 22, AMD Zen 2 (family 23) 16.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

# DGX-1 / HGX-1 hybrid cube-mesh NVLink multiplicities, microsoft/msccl-tools
# msccl/topologies/nvidia.py dgx1(); also the DGX-1V whitepaper (WP-08437-002) figure 3.
DGX1_NVLINKS = [
    [0, 2, 1, 1, 2, 0, 0, 0],
    [2, 0, 1, 2, 0, 1, 0, 0],
    [1, 1, 0, 2, 0, 0, 2, 0],
    [1, 2, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 2, 1, 1],
    [0, 1, 0, 0, 2, 0, 1, 2],
    [0, 0, 2, 0, 1, 1, 0, 2],
    [0, 0, 0, 1, 1, 2, 2, 0],
]


def mask(cpus, total):
    words = (total + 31) // 32
    w = [0] * words
    for c in cpus:
        w[c // 32] |= 1 << (c % 32)
    return ",".join("%08x" % x for x in reversed(w))


def attrs(d):
    return "".join(' %s="%s"' % (k, v) for k, v in d)


class Doc:
    def __init__(self, comment):
        self.lines = ["<!--"] + ["  " + l if l else "" for l in comment.strip("\n").split("\n")] + ["-->"]
        self.depth = 0

    def open(self, name, *kv):
        self.lines.append("  " * self.depth + "<%s%s>" % (name, attrs(kv)))
        self.depth += 1

    def close(self, name):
        self.depth -= 1
        self.lines.append("  " * self.depth + "</%s>" % name)

    def leaf(self, name, *kv):
        self.lines.append("  " * self.depth + "<%s%s/>" % (name, attrs(kv)))

    def comment(self, text):
        self.lines.append("  " * self.depth + "<!-- %s -->" % text)

    def write(self, filename):
        with open(os.path.join(HERE, filename), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def cpu_open(d, host_hash, numa, affinity, vendor, family, model):
    kv = []
    if host_hash:
        kv.append(("host_hash", host_hash))
    kv += [("numaid", numa), ("affinity", affinity), ("arch", "x86_64"), ("vendor", vendor),
           ("familyid", family), ("modelid", model)]
    d.open("cpu", *kv)


def pci_open(d, busid, cls, vendor, device, speed, width, leaf=False):
    kv = [("busid", busid), ("class", cls), ("vendor", vendor), ("device", device),
          ("subsystem_vendor", vendor), ("subsystem_device", "0x0000"), ("link_speed", speed),
          ("link_width", width)]
    (d.leaf if leaf else d.open)("pci", *kv)


def gpu(d, busid, device, speed, dev, sm, nvlinks):
    pci_open(d, busid, "0x030200", "0x10de", device, speed, 16)
    gpu_attrs = (("dev", dev), ("sm", sm), ("rank", dev), ("gdr", 1))
    if not nvlinks:
        d.leaf("gpu", *gpu_attrs)
    else:
        d.open("gpu", *gpu_attrs)
        for target, count, tclass in nvlinks:
            d.leaf("nvlink", ("target", target), ("count", count), ("tclass", tclass))
        d.close("gpu")
    d.close("pci")


def nic(d, busid, device, speed, name, dev, mbps, guid):
    pci_open(d, busid, "0x020700", "0x15b3", device, speed, 16)
    d.open("nic")
    d.leaf("net", ("name", name), ("dev", dev), ("speed", mbps), ("port", 1), ("latency", "0.000000"),
           ("guid", guid), ("maxconn", 131072), ("gdr", 1))
    d.close("nic")
    d.close("pci")


def eth_nic(d, busid, device, speed, name, dev, mbps):
    pci_open(d, busid, "0x020000", "0x15b3", device, speed, 16)
    d.open("nic")
    d.leaf("net", ("name", name), ("dev", dev), ("speed", mbps), ("port", 0), ("latency", "0.000000"),
           ("guid", "0x0"), ("maxconn", 65536), ("gdr", 0))
    d.close("nic")
    d.close("pci")


# ---------------------------------------------------------------------------------------------
def dgx1(d, host_hash=None, net_guid_base=0x248a070300a00000):
    gen3 = "8.0 GT/s PCIe"
    busids = ["0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0",
              "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0"]
    nics = ["0000:05:00.0", "0000:0c:00.0", "0000:84:00.0", "0000:8b:00.0"]
    switches = ["0000:03:00.0", "0000:08:00.0", "0000:83:00.0", "0000:87:00.0"]
    for socket in range(2):
        cpus = list(range(20 * socket, 20 * socket + 20)) + list(range(40 + 20 * socket, 60 + 20 * socket))
        cpu_open(d, host_hash, socket, mask(cpus, 80), "GenuineIntel", 6, 79)
        for s in (2 * socket, 2 * socket + 1):
            d.comment("PLX PCIe gen3 switch: GPUs %d and %d, mlx5_%d" % (2 * s, 2 * s + 1, s))
            pci_open(d, switches[s], "0x060400", "0x10b5", "0x8764", gen3, 16)
            nic(d, nics[s], "0x1013", gen3, "mlx5_%d" % s, s, 100000, "0x%x" % (net_guid_base + s))
            for g in (2 * s, 2 * s + 1):
                links = [(busids[p], c, "0x030200") for p, c in enumerate(DGX1_NVLINKS[g]) if c]
                gpu(d, busids[g], "0x1db1", gen3, g, 70, links)
            d.close("pci")
        d.close("cpu")


def write_dgx1():
    d = Doc("""
NVIDIA DGX-1 with Tesla V100 (8x V100-SXM2-16GB, hybrid cube-mesh NVLink).
Sources: DGX-1 With Tesla V100 System Architecture whitepaper (WP-08437-002): 2x Xeon E5-2698 v4
(Broadwell-EP, family 6 model 79, QPI: NCCL models 6 GB/s), four PCIe gen3 x16 switches with two
GPUs and one 100 Gb/s EDR InfiniBand adapter (ConnectX-4) each; six NVLink2 links per GPU.
NVLink pairs (msccl-tools nvidia.py dgx1()): double 0-1 0-4 1-3 2-3 2-6 4-5 5-7 6-7, single
0-2 0-3 1-2 1-5 3-7 4-6 4-7 5-6. 25 GB/s per NVLink2 link per direction (NCCL: 20).
PCIe gen3 x16 = 12 GB/s and EDR = 12.5 GB/s in NCCL's model. Bus ids are illustrative.
""")
    d.open("system", ("version", 1))
    dgx1(d)
    d.close("system")
    d.write("dgx1-v100.xml")


def write_dgx2():
    d = Doc("""
NVIDIA DGX-2 (16x V100-SXM3-32GB on two baseboards, 12 NVSwitch chips).
Sources: NVIDIA DGX-2 datasheet and "NVSwitch Accelerates NVIDIA DGX-2" (NVIDIA technical blog,
2018): each GPU has six NVLink2 links, one to each of the six NVSwitches of its baseboard; the
baseboards are joined through the switches (non-blocking, 2.4 TB/s bisection), so the switches
are one NVSwitch node here as in NCCL. 150 GB/s per GPU per direction (6 x 25; NCCL: 6 x 20).
2x Xeon Platinum 8168 (Skylake, family 6 model 85, UPI: NCCL 10 GB/s); PCIe gen3 switch tree
(two levels per socket) with two GPUs and one 100 Gb/s EDR InfiniBand adapter (ConnectX-5) per
leaf switch: 8 NICs. Bus ids are illustrative.
""")
    gen3 = "8.0 GT/s PCIe"
    nvswitches = [["0000:%02x:00.0" % b for b in (0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba)],
                  ["0000:%02x:00.0" % b for b in (0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea)]]
    d.open("system", ("version", 1))
    g = 0
    for socket in range(2):
        cpus = list(range(24 * socket, 24 * socket + 24)) + list(range(48 + 24 * socket, 72 + 24 * socket))
        cpu_open(d, None, socket, mask(cpus, 96), "GenuineIntel", 6, 85)
        for top in range(2):
            t = 2 * socket + top
            pci_open(d, "%04x:%02x:00.0" % (0, 0x10 + 0x40 * t), "0x060400", "0x10b5", "0x9797", gen3, 16)
            for leaf in range(2):
                l = 2 * t + leaf
                base = 0x11 + 0x40 * t + 0x10 * leaf
                pci_open(d, "0000:%02x:00.0" % base, "0x060400", "0x10b5", "0x9797", gen3, 16)
                nic(d, "0000:%02x:00.0" % (base + 3), "0x1017", gen3, "mlx5_%d" % l, l, 100000,
                    "0x%x" % (0x98039b0300a00000 + l))
                for k in range(2):
                    board = g // 8
                    links = [(sw, 1, "0x068000") for sw in nvswitches[board]]
                    gpu(d, "0000:%02x:00.0" % (base + 1 + k), "0x1db8", gen3, g, 70, links)
                    g += 1
                d.close("pci")
            d.close("pci")
        d.close("cpu")
    d.close("system")
    d.write("dgx2.xml")


# DGX A100 User Guide, "Network Ports"/"System Topology": GPU NUMA affinity 3,3,1,1,7,7,5,5.
A100_NUMA = [3, 1, 7, 5]


def dgx_a100(d, host_hash=None, guid_base=0x1c34da0300e00000):
    gen4 = "16.0 GT/s PCIe"
    gpus = ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
            "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"]
    nics = ["0000:0c:00.0", "0000:12:00.0", "0000:4b:00.0", "0000:54:00.0",
            "0000:8d:00.0", "0000:94:00.0", "0000:ba:00.0", "0000:cc:00.0"]
    switches = ["0000:01:00.0", "0000:41:00.0", "0000:81:00.0", "0000:b1:00.0"]
    nvswitches = ["0000:%02x:00.0" % b for b in (0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9)]
    for s in range(4):
        numa = A100_NUMA[s]
        cpus = list(range(16 * numa, 16 * numa + 16)) + list(range(128 + 16 * numa, 144 + 16 * numa))
        cpu_open(d, host_hash, numa, mask(cpus, 256), "AuthenticAMD", 23, 49)
        d.comment("PCIe gen4 switch (Broadcom PEX88096): GPUs %d, %d and mlx5_%d, mlx5_%d" %
                  (2 * s, 2 * s + 1, 2 * s, 2 * s + 1))
        pci_open(d, switches[s], "0x060400", "0x1000", "0xc010", gen4, 16)
        for k in (2 * s, 2 * s + 1):
            gpu(d, gpus[k], "0x20b0", gen4, k, 80, [(sw, 2, "0x068000") for sw in nvswitches])
            nic(d, nics[k], "0x101b", gen4, "mlx5_%d" % k, k, 200000, "0x%x" % (guid_base + k))
        d.close("pci")
        d.close("cpu")


A100_COMMENT = """
NVIDIA DGX A100 (8x A100-SXM4-40GB, 6 NVSwitch gen2, 8 HDR InfiniBand compute NICs).
Sources: DGX A100 System Architecture whitepaper (WP-10083-001) and DGX A100 User Guide: each
A100 has twelve NVLink3 links, two to each of six NVSwitches (600 GB/s bidirectional, so 300 GB/s
per direction = 12 x 25; NCCL: 12 x 20); 2x AMD EPYC 7742 (Rome, family 23 model 49) in NPS4 mode,
GPUs on NUMA nodes 3,3,1,1,7,7,5,5 (only the NUMA nodes with devices are listed, as NCCL's trimmed
dumps do; AMD Zen 2 inter-socket: NCCL 16 GB/s); four PCIe gen4 switches with two GPUs and two
ConnectX-6 HDR 200 Gb/s (25 GB/s) adapters each. PCIe gen4 x16 = 24 GB/s in NCCL's model, so a
GPU reaches its NIC at 24 GB/s. The two storage NICs are left out. Bus ids are illustrative.
"""


def write_dgx_a100():
    d = Doc(A100_COMMENT)
    d.open("system", ("version", 1))
    dgx_a100(d)
    d.close("system")
    d.write("dgx-a100.xml")


def dgx_h100(d, host_hash=None, guid_base=0x946dae0300200000):
    gen5 = "32.0 GT/s PCIe"
    gpus = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
            "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]
    nics = ["0000:1a:00.0", "0000:40:00.0", "0000:53:00.0", "0000:5e:00.0",
            "0000:9c:00.0", "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0"]
    switches = ["0000:15:00.0", "0000:4d:00.0", "0000:97:00.0", "0000:cb:00.0"]
    # 18 NVLink4 links per GPU over four NVSwitch gen3 chips: 5 + 4 + 4 + 5.
    nvswitches = [("0000:05:00.0", 5), ("0000:06:00.0", 4), ("0000:07:00.0", 4), ("0000:08:00.0", 5)]
    for socket in range(2):
        cpus = list(range(56 * socket, 56 * socket + 56)) + list(range(112 + 56 * socket, 168 + 56 * socket))
        cpu_open(d, host_hash, socket, mask(cpus, 224), "GenuineIntel", 6, 143)
        for s in (2 * socket, 2 * socket + 1):
            d.comment("PCIe gen5 switch: GPUs %d, %d and mlx5_%d, mlx5_%d" % (2 * s, 2 * s + 1, 2 * s, 2 * s + 1))
            pci_open(d, switches[s], "0x060400", "0x1000", "0xc030", gen5, 16)
            for k in (2 * s, 2 * s + 1):
                gpu(d, gpus[k], "0x2330", gen5, k, 90, [(sw, c, "0x068000") for sw, c in nvswitches])
                nic(d, nics[k], "0x1021", gen5, "mlx5_%d" % k, k, 400000, "0x%x" % (guid_base + k))
            d.close("pci")
        d.close("cpu")


H100_COMMENT = """
NVIDIA DGX H100 (8x H100-SXM5-80GB, 4 NVSwitch gen3, 8 NDR InfiniBand NICs).
Sources: NVIDIA H100 Tensor Core GPU Architecture whitepaper and DGX H100 User Guide: eighteen
NVLink4 links per GPU over four NVSwitch chips (5+4+4+5), 900 GB/s bidirectional = 450 GB/s per
direction (18 x 25; NCCL: 18 x 20.6); 2x Xeon Platinum 8480C (Sapphire Rapids, family 6 model 143,
inter-socket: NCCL 22 GB/s); eight ConnectX-7 NDR 400 Gb/s (50 GB/s) adapters, one per GPU,
behind PCIe gen5 switches (48 GB/s x16 in NCCL's model). Bus ids are illustrative.
"""


def write_dgx_h100():
    d = Doc(H100_COMMENT)
    d.open("system", ("version", 1))
    dgx_h100(d)
    d.close("system")
    d.write("dgx-h100.xml")


def ndv2(d, host_hash, guid):
    # Azure/azhpc-images topology/ndv2-topo.xml (hidden PCI tree: every device on its own
    # domain, "16 GT/s" x16), completed with what NCCL reads from NVML on the VM.
    speed = "16 GT/s"
    gpus = ["0001:00:00.0", "0002:00:00.0", "0003:00:00.0", "0004:00:00.0",
            "0005:00:00.0", "0006:00:00.0", "0007:00:00.0", "0008:00:00.0"]
    for socket in range(2):
        cpu_open(d, host_hash, socket, "00000000,000fffff" if socket == 0 else "000000ff,fff00000",
                 "GenuineIntel", 6, 85)
        for g in range(4 * socket, 4 * socket + 4):
            links = [(gpus[p], c, "0x030200") for p, c in enumerate(DGX1_NVLINKS[g]) if c]
            gpu(d, gpus[g], "0x1db5", speed, g, 70, links)
        if socket == 0:
            pci_open(d, "0101:00:00.0", "0x020700", "0x15b3", "0x1016", speed, 16)
            d.open("nic")
            d.leaf("net", ("name", "mlx5_0"), ("dev", 0), ("speed", 100000), ("port", 1),
                   ("latency", "0.000000"), ("guid", guid), ("maxconn", 131072), ("gdr", 1))
            d.close("nic")
            d.close("pci")
        d.close("cpu")


def write_ndv2_x2():
    d = Doc("""
Two Azure NDv2 VMs (Standard_ND40rs_v2): 8x V100-SXM2-32GB each, hybrid cube-mesh NVLink (the
HGX-1 board of the DGX-1, msccl-tools dgx1() pairs), one 100 Gb/s EDR InfiniBand NIC per VM.
Sources: the PCI layout is Azure/azhpc-images topology/ndv2-topo.xml (Hyper-V shows every device on
its own PCI domain at "16 GT/s" x16 = 24 GB/s in NCCL's model); Azure NDv2 documentation (2x Xeon
Platinum 8168, Skylake family 6 model 85, "100 Gb/s InfiniBand EDR"); TACCL (NSDI'23) for the
1 NIC per node. Hosts are told apart by host_hash, as in NCCL's multi-node (MNNVL) XML.
NVLink2 25 GB/s per link per direction; EDR 12.5 GB/s, the bottleneck between the nodes.
""")
    d.open("system", ("version", 1))
    ndv2(d, "0x1", "0x98039b0300c00001")
    ndv2(d, "0x2", "0x98039b0300c00002")
    d.close("system")
    d.write("ndv2-x2.xml")


def write_dgx_a100_x2():
    d = Doc(A100_COMMENT + "Two of them (host_hash 0x1 and 0x2) joined by a rail-optimised HDR fabric.\n")
    d.open("system", ("version", 1))
    dgx_a100(d, "0x1", 0x1c34da0300e00000)
    dgx_a100(d, "0x2", 0x1c34da0300f00000)
    d.close("system")
    d.write("dgx-a100-x2.xml")


def write_dgx_h100_x2():
    d = Doc(H100_COMMENT + "Two of them (host_hash 0x1 and 0x2) joined by an NDR fabric.\n")
    d.open("system", ("version", 1))
    dgx_h100(d, "0x1", 0x946dae0300200000)
    dgx_h100(d, "0x2", 0x946dae0300300000)
    d.close("system")
    d.write("dgx-h100-x2.xml")


def write_pcie_8gpu():
    d = Doc("""
A PCIe-only 8-GPU server: 8x Tesla V100-PCIE-16GB (no NVLink) behind four PCIe gen3 switches,
two per socket, and one 100 Gb/s Ethernet adapter (ConnectX-5 in Ethernet mode).
Sources: the 8-GPU PCIe layout of e.g. Supermicro SYS-4029GP-TRT (two Broadcom PEX 9797 gen3
switches per CPU); 2x Xeon Gold 6148 (Skylake, family 6 model 85, UPI: NCCL 10 GB/s). PCIe gen3
x16 = 12 GB/s in NCCL's model, so pairs on one switch get 12 GB/s (PIX), pairs on one socket
12 GB/s through the CPU (PHB) and pairs across sockets 10 GB/s (SYS). Bus ids are illustrative.
""")
    gen3 = "8.0 GT/s PCIe"
    d.open("system", ("version", 1))
    g = 0
    for socket in range(2):
        cpus = list(range(20 * socket, 20 * socket + 20)) + list(range(40 + 20 * socket, 60 + 20 * socket))
        cpu_open(d, None, socket, mask(cpus, 80), "GenuineIntel", 6, 85)
        for s in (2 * socket, 2 * socket + 1):
            base = 0x18 + 0x20 * s + (0x40 if socket else 0)
            pci_open(d, "0000:%02x:00.0" % base, "0x060400", "0x10b5", "0x9797", gen3, 16)
            if s == 0:
                eth_nic(d, "0000:%02x:00.0" % (base + 7), "0x1017", gen3, "eth2", 0, 100000)
            for k in range(2):
                gpu(d, "0000:%02x:00.0" % (base + 1 + k), "0x1db4", gen3, g, 70, [])
                g += 1
            d.close("pci")
        d.close("cpu")
    d.close("system")
    d.write("pcie-8gpu.xml")


if __name__ == "__main__":
    write_dgx1()
    write_dgx2()
    write_dgx_a100()
    write_dgx_h100()
    write_ndv2_x2()
    write_dgx_a100_x2()
    write_dgx_h100_x2()
    write_pcie_8gpu()
