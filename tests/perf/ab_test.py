"""perf/compare/ab.py: Weft against an earlier Weft, cell by cell, slower only beyond noise."""
import csv
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf", "compare"))
import ab  # noqa: E402

FIELDS = ["lib", "algo", "label", "coll", "nranks", "bytes", "time_us", "algbw", "busbw",
          "wrong", "iters", "round", "spell_ns", "spell_after_ns"]


def run_dir(root, name, times):
    """A compare.py result dir holding `times`: {(coll, nranks, bytes): [us per round]}."""
    d = os.path.join(root, name)
    os.makedirs(d)
    with open(os.path.join(d, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for (coll, nranks, nbytes), rounds in times.items():
            for i, t in enumerate(rounds):
                w.writerow({"lib": "weft", "algo": "out-of-place", "label": "weft", "coll": coll,
                            "nranks": nranks, "bytes": nbytes, "time_us": t, "algbw": 1,
                            "busbw": 1, "wrong": 0, "iters": 10, "round": i + 1})
    return d


class AbTest(unittest.TestCase):
    def test_slower_only_beyond_the_spread_of_a_builds_runs(self):
        with tempfile.TemporaryDirectory() as root:
            cell, other = ("allreduce", 2, 8), ("allreduce", 2, 1024)
            b1 = run_dir(root, "b1", {cell: [1.0, 1.2], other: [10.0]})
            b2 = run_dir(root, "b2", {cell: [1.1], other: [10.5]})
            a1 = run_dir(root, "a1", {cell: [1.08], other: [12.0]})
            a2 = run_dir(root, "a2", {cell: [1.3], other: [12.2]})
            rows = {r["cell"][:3]: r for r in ab.compare(ab.read_runs([b1, b2]),
                                                          ab.read_runs([a1, a2]))}
            # 8 B: best 1.0 -> 1.08, runs 1.0 / 1.1 and 1.08 / 1.3 apart: noise 0.2, not slower.
            self.assertAlmostEqual(rows[cell]["ratio"], 1.08)
            self.assertAlmostEqual(rows[cell]["noise"], 1.3 / 1.08 - 1)
            # 1 KiB: 10 -> 12, runs 5% and 2% apart: slower beyond noise.
            self.assertAlmostEqual(rows[other]["ratio"], 1.2)
            self.assertGreater(rows[other]["ratio"] - 1, rows[other]["noise"])

    def test_one_run_each_uses_the_rounds_spread(self):
        with tempfile.TemporaryDirectory() as root:
            cell = ("broadcast", 4, 64)
            b = run_dir(root, "b", {cell: [2.0, 3.0]})
            a = run_dir(root, "a", {cell: [2.4]})
            (row,) = ab.compare(ab.read_runs([b]), ab.read_runs([a]))
            self.assertAlmostEqual(row["noise"], 0.5)
            self.assertAlmostEqual(row["ratio"], 1.2)


if __name__ == "__main__":
    unittest.main()
