#!/usr/bin/env python3
"""The GPU check's parsing helpers, checked without a GPU: the budget check of run.sh's step
limits (check_budget.py) and the summary (gpu_summary.py: the results file, perf tables with and
without the roofline columns, the verdict, the README block)."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_budget  # noqa: E402
import gpu_summary  # noqa: E402

SCRIPT = """#!/usr/bin/env bash
# BEGIN STEP LIMITS
declare -A limit=(
  [info]=5
  [correct_threads]=100
  [correct_procs]=100
  [summary]=5
)
# END STEP LIMITS
begin_step info
for mode in threads procs; do
  begin_step "correct_$mode"
done
begin_step summary
"""

# A perf-tool table on device memory with the roofline columns, then one of nccl-tests without.
ROOFLINE_TABLE = """# Buffers in device memory (cuMemAlloc), timed with CUDA events
# Roofline: HBM 4000 GB/s (--hbm-gbs); 2 rank(s) on the GPU
           8             2     float     sum      -1    12.50    0.00    0.00       0    11.00    0.00    0.00       0     0.00  0.000  0.000
   268435456      67108864     float     sum      -1    700.0  383.48  383.48       0    720.0  372.83  372.83       0    536.9  0.767  0.746
# Out of bounds values : 0 OK
"""
PLAIN_TABLE = """   268435456      67108864     float     sum      -1    900.0  298.26  447.39       0    880.0  305.04  457.56       0
   not a row
"""


class Budget(unittest.TestCase):
    def test_within(self):
        self.assertEqual(check_budget.problems(SCRIPT, 360), [])
        self.assertEqual(check_budget.limits(SCRIPT)["correct_procs"], 100)

    def test_over_budget(self):
        self.assertIn("sum to 210 s, more than the 200 s budget",
                      check_budget.problems(SCRIPT, 200)[0])

    def test_step_without_limit_and_limit_without_step(self):
        text = SCRIPT.replace("begin_step summary", "begin_step report")
        found = check_budget.problems(text, 360)
        self.assertIn("step report is started but has no limit", found)
        self.assertIn("step summary has a limit but is started 0 times", found)

    def test_order_and_bad_lines(self):
        text = SCRIPT.replace("  [info]=5\n", "").replace("  [summary]=5\n",
                                                          "  [summary]=5\n  [info]=5\n")
        self.assertIn("the table's order is not the order the steps run in",
                      check_budget.problems(text, 360))
        self.assertIn("unreadable line", check_budget.problems(
            SCRIPT.replace("[info]=5", "[info]=five"), 360)[0])
        self.assertIn("no BEGIN STEP LIMITS", check_budget.problems("begin_step x\n", 360)[0])

    def test_the_real_script(self):
        with open(os.path.join(HERE, "run.sh")) as f:
            text = f.read()
        self.assertEqual(check_budget.problems(text, check_budget.BUDGET_S), [])
        self.assertLessEqual(sum(check_budget.limits(text).values()), 360)


class Summary(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_results_and_verdict(self):
        path = self.write("r.tsv", "info\tgpu\tPASS\t0\tH200\n"
                          "hazards\tsame_stream\tHANG\t9\tkilled\n"
                          "bad line without tabs\n")
        results = gpu_summary.parse_results(path)
        self.assertEqual(results[0], ("info", "gpu", "PASS", 0, "H200"))
        self.assertEqual(results[1][2], "HANG")
        self.assertEqual(results[2][2], "FAIL")  # the malformed line is not lost
        line, status = gpu_summary.verdict(results)
        self.assertEqual(status, 1)
        self.assertIn("hazards/same_stream", line)
        self.assertEqual(gpu_summary.verdict([("a", "b", "SKIP", 0, "")])[1], 2)
        self.assertEqual(gpu_summary.verdict([("a", "b", "PASS", 0, ""),
                                              ("a", "c", "SKIP", 0, "")]),
                         ("GPU CHECK: PASSED", 0))
        self.assertEqual(gpu_summary.verdict([("a", "b", "NOTRUN", 0, "")])[1], 1)
        self.assertEqual(gpu_summary.parse_results("/nonexistent")[0][2], "FAIL")

    def test_tables(self):
        rows = gpu_summary.table_rows(self.write("t.txt", ROOFLINE_TABLE))
        self.assertEqual(len(rows), 2)
        self.assertEqual(rows[1][:3], (268435456, 700.0, 383.48))
        self.assertAlmostEqual(rows[1][5], 0.767)
        plain = gpu_summary.table_rows(self.write("p.txt", PLAIN_TABLE))
        self.assertEqual(plain, [(268435456, 900.0, 447.39, 880.0, 457.56, None)])

    def test_busbw_lines(self):
        t = self.write("t.txt", ROOFLINE_TABLE)
        lines, cells = gpu_summary.busbw_lines([("allreduce", 2, "perf t2", t)], 1500.0)
        # 2 ranks at 1500 GB/s copied: the bound is 2 x 256 MiB / 1.5e3 B/us = 357.9 us.
        self.assertEqual(lines[1], "BUSBW allreduce t2 268435456 busbw=383.48 time=700 "
                         "copy_frac=0.51 hbm_frac=0.77")
        self.assertTrue(lines[0].startswith("BUSBW allreduce t2 8 "))
        self.assertEqual(cells[("allreduce", 2)][268435456], "383.48 (0.51)")
        lines, _ = gpu_summary.busbw_lines([("allreduce", 2, "x", t)], None)
        self.assertNotIn("copy_frac", lines[1])
        # allgather with 3 ranks: 1 MiB asked, 1048572 B measured, shown under 1 MiB.
        odd = self.write("odd.txt", PLAIN_TABLE.replace("   268435456", "     1048572"))
        lines, cells = gpu_summary.busbw_lines([("allgather", 3, "x", odd)], 1500.0)
        self.assertTrue(lines[0].startswith("BUSBW allgather t3 1048572 busbw=447.39"), lines)
        self.assertIn(1 << 20, cells[("allgather", 3)])
        self.assertEqual(gpu_summary.nominal(8), 8)
        self.assertEqual(gpu_summary.nominal(0), 0)

    def test_main_prints_the_block_then_the_verdict_last(self):
        r = self.write("r.tsv", "info\tgpu\tPASS\t0\tH200\n")
        t = self.write("t.txt", ROOFLINE_TABLE)
        d = self.write("d2d.txt", "d2d_GBps 1500.0 (copy)\n")
        block = os.path.join(self.dir.name, "block.md")
        out = subprocess.run([sys.executable, os.path.join(HERE, "gpu_summary.py"), "--results", r,
                              "--d2d", d, "--readme-out", block, f"--table=allreduce:2:t2:{t}"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[-1], "GPU CHECK: PASSED")
        self.assertIn("TOTAL pass=1 fail=0 hang=0 skip=0 notrun=0", lines)
        self.assertLess(lines.index("----- end of the README block -----"),
                        lines.index("== summary"))
        with open(block) as f:
            text = f.read()
        self.assertIn("| 268435456 | 383.48 (0.51) |", text)


if __name__ == "__main__":
    unittest.main()
