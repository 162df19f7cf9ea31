// weft-topo, run as a program: tree, matrix, paths, XML, dot and PNG output, errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "src/topo/xml_reader.h"
#include "tests/unit/topo/topo_test_util.h"

namespace weft::topo {
namespace {

struct ToolRun {
  int status = -1;
  std::string out;
};

ToolRun run(const std::string& args, const std::string& env = "") {
  ToolRun r;
  std::string cmd = env + " " + std::string(WEFT_TOPO_TOOL) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class TopoTool : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/weft-topo-tool-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir).c_str()); }
  std::string dir;
};

TEST_F(TopoTool, PrintsThisMachine) {
  ToolRun r = run("--report --matrix");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("probe hwloc: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("probe nvml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host0 [hash"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu"), std::string::npos) << r.out;
}

TEST_F(TopoTool, TreeMatrixAndPathsOfAReferenceMachine) {
  ToolRun r = run("--load " + testing::golden("dgx1-v100.xml") + " --matrix --path gpu0 gpu5");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("gpu0 0000:06:00.0 sm70  [PCI 12 GB/s]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("= NVL x2 50 GB/s -> gpu1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("net mlx5_0 dev 0 port 1, 100 Gb/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("= SYS 6 GB/s cpu0 <-> cpu1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVB 50"), std::string::npos) << r.out;  // matrix cell gpu0 -> gpu5
  EXPECT_NE(r.out.find("gpu0 -> gpu5: NVB 50 GB/s, 2 hop(s)"), std::string::npos) << r.out;
  r = run("--load " + testing::golden("dgx1-v100.xml") + " --no-tree --no-nvb --path gpu0 gpu5");
  EXPECT_NE(r.out.find("gpu0 -> gpu5: SYS 6 GB/s"), std::string::npos) << r.out;
  r = run("--load " + testing::golden("dgx1-v100.xml") +
          " --rates nccl --no-tree --path gpu0 gpu1");
  EXPECT_NE(r.out.find("gpu0 -> gpu1: NVL 40 GB/s"), std::string::npos) << r.out;
  // NCCL_TOPO_FILE stands in for the probes, as in the library.
  r = run("--no-tree --path gpu1 gpu7", "NCCL_TOPO_FILE=" + testing::golden("dgx1-v100.xml"));
  EXPECT_NE(r.out.find("gpu1 -> gpu7: NVB 25 GB/s"), std::string::npos) << r.out;
}

TEST_F(TopoTool, WritesXmlDotAndPng) {
  std::string xml = dir + "/out.xml", dot = dir + "/out.dot", png = dir + "/out.png";
  ToolRun r = run("--load " + testing::golden("dgx-h100-x2.xml") + " --no-tree --xml " + xml +
                  " --dot " + dot);
  ASSERT_EQ(r.status, 0) << r.out;
  Topology a = readTopologyFile(testing::golden("dgx-h100-x2.xml"));
  Topology b = readTopologyFile(xml);
  EXPECT_EQ(a.diff(b), "");
  std::string d = testing::slurp(dot);
  EXPECT_EQ(d.rfind("graph topology {", 0), 0u) << d;
  EXPECT_NE(d.find("subgraph cluster_h1"), std::string::npos);
  EXPECT_NE(d.find("label=\"NVL x18 450 GB/s\""), std::string::npos);
  r = run("--load " + testing::golden("dgx1-v100.xml") + " --xml -");
  EXPECT_EQ(r.out.rfind("<!-- written by weft-topo", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("host0 ["), std::string::npos) << "stdout carries only the XML";

  if (system("command -v dot >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "graphviz 'dot' not installed; PNG output not checked";
  r = run("--load " + testing::golden("dgx-a100.xml") + " --no-tree --png " + png);
  ASSERT_EQ(r.status, 0) << r.out;
  std::string p = testing::slurp(png);
  ASSERT_GT(p.size(), 8u);
  EXPECT_EQ(p.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(TopoTool, ErrorsAreClear) {
  ToolRun r = run("--frobnicate");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown option --frobnicate"), std::string::npos) << r.out;
  r = run("--load");
  EXPECT_EQ(r.status, 2);
  std::string bad = dir + "/bad.xml";
  FILE* f = fopen(bad.c_str(), "w");
  fputs(
      "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\"/>\n</cpu></system>",
      f);
  fclose(f);
  r = run("--load " + bad);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("bad.xml:3: <pci busid=\"0000:01:00.0\">: missing attribute class"),
            std::string::npos)
      << r.out;
  r = run("--load " + testing::golden("dgx1-v100.xml") + " --no-tree --path gpu0 gpu99");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("no node named 'gpu99'"), std::string::npos) << r.out;
  r = run("--probes gpu");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("unknown probe 'gpu'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace weft::topo
