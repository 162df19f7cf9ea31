"""perf/compare/compare.py: how runs are grouped into the machine's spells and which rounds each
cell compares."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf",
                                "compare"))
import compare  # noqa: E402


def row(lib, size, us, spell, coll="allreduce", n=2, wrong=0, rnd=1):
    algo = "out-of-place" if lib == "weft" else "default"
    r = compare.make_result(lib, algo, coll, n, size, us, wrong, 100, spell)
    r["round"] = rnd
    return r


FAST, SLOW = (120.0, 130.0), (560.0, 600.0)


class SpellSplit(unittest.TestCase):
    def test_two_groups_split_between_them(self):
        rows = [row("weft", 8, 1.0, s) for s in (FAST, (110.0, 150.0), SLOW, (480.0, 700.0))]
        split = compare.spell_split(rows)
        self.assertGreater(split, 150.0)
        self.assertLess(split, 480.0)

    def test_a_stray_reading_does_not_move_the_split_into_a_group(self):
        rows = [row("weft", 8, 1.0, s) for s in [FAST] * 20 + [SLOW] * 20 + [(250.0, 250.0)]]
        split = compare.spell_split(rows)
        self.assertGreater(split, 130.0)
        self.assertLess(split, 560.0)

    def test_one_spell_with_a_tail_of_disturbed_readings_is_one_spell(self):
        spread = [400.0 + 20 * k for k in range(20)] + [700.0 + 50 * k for k in range(8)]
        spread += [900.0, 1100.0, 1300.0, 1550.0]
        rows = [row("weft", 8, 1.0, (v, v)) for v in spread]
        self.assertIsNone(compare.spell_split(rows))

    def test_close_readings_are_one_spell(self):
        rows = [row("weft", 8, 1.0, s) for s in ((450.0, 500.0), (520.0, 610.0), (430.0, 590.0))]
        self.assertIsNone(compare.spell_split(rows))

    def test_no_readings_no_split(self):
        self.assertIsNone(compare.spell_split([row("weft", 8, 1.0, (None, None))]))


class SpellOf(unittest.TestCase):
    def test_tags(self):
        self.assertEqual(compare.spell_of(row("weft", 8, 1, FAST), 300.0), "fast")
        self.assertEqual(compare.spell_of(row("weft", 8, 1, SLOW), 300.0), "slow")
        self.assertEqual(compare.spell_of(row("weft", 8, 1, (120.0, 600.0)), 300.0), "mixed")
        self.assertEqual(compare.spell_of(row("weft", 8, 1, SLOW), None), "one")
        self.assertIsNone(compare.spell_of(row("weft", 8, 1, (None, 600.0)), 300.0))


def compared(matched, size=8):
    w = compare.weft_at(matched, size)
    p = compare.best_peer_at(matched, size, "busbw")
    return w, p


class SpellMatched(unittest.TestCase):
    def test_a_peer_in_a_fast_spell_meets_weft_in_the_same_spell(self):
        rows = [row("weft", 8, 0.15, FAST, rnd=1), row("weft", 8, 0.35, SLOW, rnd=2),
                row("openmpi", 8, 0.25, FAST, rnd=1), row("openmpi", 8, 0.70, SLOW, rnd=2)]
        w, p = compared(compare.spell_matched(rows, 300.0))
        self.assertEqual((w["time_us"], p["time_us"], w["spell"]), (0.15, 0.25, "fast"))

    def test_weft_only_slow_where_the_peer_had_both(self):
        # Best of rounds alone would set Weft's slow 0.35 against the peer's fast 0.19.
        rows = [row("weft", 8, 0.35, SLOW, rnd=1), row("weft", 8, 0.40, SLOW, rnd=2),
                row("openmpi", 8, 0.19, FAST, rnd=1), row("openmpi", 8, 0.70, SLOW, rnd=2)]
        w, p = compared(compare.spell_matched(rows, 300.0))
        self.assertEqual((w["time_us"], p["time_us"], w["spell"]), (0.35, 0.70, "slow"))
        w, p = compared(compare.best_of_rounds(rows))
        self.assertEqual((w["time_us"], p["time_us"]), (0.35, 0.19))

    def test_the_spell_where_the_best_peer_was_fastest_is_chosen(self):
        # At large sizes the slow spell (two caches) can be the faster one for everyone.
        big = 64 << 20
        rows = [row("weft", big, 5000, FAST, rnd=1), row("weft", big, 4000, SLOW, rnd=2),
                row("openmpi", big, 9000, FAST, rnd=1), row("openmpi", big, 7000, SLOW, rnd=2)]
        w, p = compared(compare.spell_matched(rows, 300.0), big)
        self.assertEqual((w["time_us"], p["time_us"], w["spell"]), (4000, 7000, "slow"))

    def test_no_common_spell_falls_back_to_best_rounds_and_says_so(self):
        rows = [row("weft", 8, 0.35, SLOW), row("openmpi", 8, 0.19, FAST)]
        w, p = compared(compare.spell_matched(rows, 300.0))
        self.assertEqual((w["time_us"], p["time_us"], w["spell"]), (0.35, 0.19, "any"))

    def test_mixed_measurements_are_not_matched(self):
        rows = [row("weft", 8, 0.10, (120.0, 600.0)), row("weft", 8, 0.36, SLOW),
                row("openmpi", 8, 0.70, SLOW)]
        w, p = compared(compare.spell_matched(rows, 300.0))
        self.assertEqual((w["time_us"], w["spell"]), (0.36, "slow"))

    def test_a_wrong_round_in_another_spell_is_never_hidden(self):
        rows = [row("weft", 8, 0.15, FAST, rnd=1), row("weft", 8, 0.35, SLOW, rnd=2, wrong=3),
                row("openmpi", 8, 0.25, FAST, rnd=1)]
        w, _ = compared(compare.spell_matched(rows, 300.0))
        self.assertEqual(w["wrong"], 3)
        rows = [row("weft", 8, 0.15, FAST), row("openmpi", 8, 0.25, FAST),
                row("mpich", 8, 0.30, SLOW, wrong=1)]
        matched = compare.spell_matched(rows, 300.0)
        self.assertEqual([r["wrong"] for r in matched if r["lib"] == "mpich"], [1])

    def test_without_readings_each_library_keeps_its_best_round(self):
        rows = [row("weft", 8, 0.30, (None, None), rnd=1), row("weft", 8, 0.20, (None, None), rnd=2),
                row("openmpi", 8, 0.25, (None, None))]
        w, p = compared(compare.spell_matched(rows, None))
        self.assertEqual((w["time_us"], w["spell"]), (0.20, "any"))


class IterationEstimate(unittest.TestCase):
    """Weft's loops are planned from the sizes before them (estimate_seconds)."""

    def test_latency_bound_sizes_keep_the_last_time(self):
        self.assertAlmostEqual(compare.estimate_seconds([(8, 10e-6), (16, 10e-6)], 32), 10e-6)
        self.assertAlmostEqual(compare.estimate_seconds([(512, 10e-6), (1024, 9e-6)], 2048), 9e-6)

    def test_bandwidth_bound_sizes_grow_with_the_size(self):
        measured = [(1 << 20, 1e-4), (2 << 20, 2e-4)]
        self.assertAlmostEqual(compare.estimate_seconds(measured, 4 << 20), 4e-4)

    def test_in_between_follows_the_line_through_the_last_two(self):
        self.assertAlmostEqual(compare.estimate_seconds([(512, 10e-6), (1024, 11e-6)], 2048), 13e-6)

    def test_one_size_alone_scales(self):
        self.assertAlmostEqual(compare.estimate_seconds([(8, 10e-6)], 16), 20e-6)


class ResultsDir(unittest.TestCase):
    """compare.py writes its results into the build directory, never among the sources."""

    def test_default_is_a_stamped_folder_of_the_build_directory(self):
        build = os.path.join(compare.REPO, "build")
        self.assertEqual(compare.results_dir(None, build, "20260101-000000"),
                         os.path.join(build, "perf", "results", "20260101-000000"))

    def test_a_build_directory_outside_the_checkout_is_used_as_given(self):
        self.assertEqual(compare.results_dir(None, "/tmp/b", "s"), "/tmp/b/perf/results/s")

    def test_out_outside_the_checkout_or_in_a_build_folder_is_kept(self):
        build = os.path.join(compare.REPO, "build")
        self.assertEqual(compare.results_dir("/tmp/cmp", build, "s"), "/tmp/cmp")
        inside = os.path.join(compare.REPO, "build-cmp", "run")
        self.assertEqual(compare.results_dir(inside, build, "s"), inside)

    def test_out_among_the_sources_is_refused(self):
        build = os.path.join(compare.REPO, "build")
        for where in ("perf/compare/results", "perf", "."):
            self.assertIsNone(compare.results_dir(os.path.join(compare.REPO, where), build, "s"),
                              where)


if __name__ == "__main__":
    unittest.main()
