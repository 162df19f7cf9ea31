"""Spells.

A virtual machine's speed changes with where the hypervisor puts its virtual CPUs: a cache line
crosses between two of them several times faster for a while, then slower, and back, every few
seconds to minutes (perf/probes/line_round_trip.h; see perf/README.md, "Spells"). Latency-bound
cells move with it several-fold, so every measurement is tagged with a reading of the round trip
taken just before and just after it (the peer benchmarks take theirs between sizes, with the
other ranks asleep), and each cell compares runs made in the same spell (see spell_matched).
"""

import collections
import math
import os
import re
import subprocess

from .common import best_peer_at, good, weft_at


SPELL_TRIPS = 4000  # a steady reading that stays within one spell


SPELL_MIN_SPREAD = 1.5  # two spells only when their typical round trips differ this much


SPELL_VALLEY_SHARE = 0.05  # and few readings fall between them


def spell_probe(args):
    """A cache line's round trip between the first two CPUs this script may use, in ns, or None
    (fewer than two CPUs, not pinned, or the probe failed)."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        return None
    try:
        out = subprocess.run([os.path.join(args.build, "perf", "line_pingpong"), str(cpus[0]),
                              str(cpus[1]), str(SPELL_TRIPS)], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"round trip ([0-9.]+) ns", out)
    return float(m.group(1)) if m and "not pinned" not in out else None


def spell_split(rows):
    """The round trip (ns) that splits this run's spell readings into a fast and a slow spell, or
    None for one spell. Otsu's threshold on their logarithms (the split that leaves the two groups
    most apart), kept only when the groups' geometric means differ by SPELL_MIN_SPREAD or more and
    the middle third between them (in log) holds at most SPELL_VALLEY_SHARE of the readings: two
    spells leave a valley there, while one spell with a tail of disturbed readings does not."""
    vals = sorted(math.log(v) for v in spell_readings(rows))
    if len(vals) < 2:
        return None
    total, n = sum(vals), len(vals)
    best, below = None, 0.0
    for k in range(1, n):
        below += vals[k - 1]
        m0, m1 = below / k, (total - below) / (n - k)
        score = k * (n - k) * (m1 - m0) ** 2
        if vals[k] > vals[k - 1] and (best is None or score > best[0]):
            best = (score, k, m0, m1)
    if best is None or best[3] - best[2] < math.log(SPELL_MIN_SPREAD):
        return None
    _, k, m0, m1 = best
    lo, hi = m0 + (m1 - m0) / 3, m1 - (m1 - m0) / 3
    if sum(lo < v < hi for v in vals) > SPELL_VALLEY_SHARE * n:
        return None
    return math.exp((vals[k - 1] + vals[k]) / 2)


def spell_readings(rows):
    """Every spell reading of the rows (before and after each measurement), in ns."""
    return [v for r in rows for v in (r.get("spell_ns"), r.get("spell_after_ns")) if v]


def spell_of(r, split):
    """'fast' or 'slow' when both readings around the measurement agree, 'mixed' when the spell
    changed during it, 'one' when the run saw a single spell, None without readings."""
    before, after = r.get("spell_ns"), r.get("spell_after_ns")
    if not before or not after:
        return None
    if split is None:
        return "one"
    a, b = ("fast" if v < split else "slow" for v in (before, after))
    return a if a == b else "mixed"


def best_of_rounds(rows):
    """One row per library variant and cell: its fastest round, or a wrong one if any round was
    wrong (a wrong result is never hidden by a right one)."""
    best = {}
    for r in rows:
        key = variant(r)
        old = best.get(key)
        if old is None or (good(old) and (not good(r) or r["busbw"] > old["busbw"])):
            best[key] = r
    return list(best.values())


def spell_matched(rows, split):
    """Per cell (collective, ranks, size), each library variant's best round within one spell, the
    same spell for all of them: of the spells in which Weft's compared variant and at least one
    peer ran right, the one in which the best peer was fastest (the hardest on Weft). Rows carry
    'spell': that spell, or 'any' where no spell holds both (there: each library's best round
    whatever the spell). A variant's wrong round, in any spell, replaces its row: a wrong result
    is never hidden."""
    cells = {}
    for r in rows:
        cells.setdefault((r["coll"], r["nranks"], r["bytes"]), []).append(r)
    out = []
    for (coll, n, size), cell in sorted(cells.items()):
        everywhere = best_of_rounds(cell)
        picked, spell, peer_best = everywhere, "any", None
        for candidate in ("fast", "slow", "one"):
            best = best_of_rounds([r for r in cell if spell_of(r, split) == candidate])
            w, p = weft_at(best, size), best_peer_at(best, size, "busbw")
            if w and good(w) and p and (peer_best is None or p["busbw"] > peer_best):
                picked, spell, peer_best = best, candidate, p["busbw"]
        wrong = {variant(r): r for r in everywhere if not good(r)}
        for r in picked:
            out.append(dict(wrong.pop(variant(r), r), spell=spell))
        out += [dict(r, spell=spell) for r in wrong.values()]
    return out


def variant(r):
    return (r["lib"], r["algo"], r["coll"], r["nranks"], r["bytes"])


def spell_lines(raw, split, matched):
    """What the spell readings showed and how the cells were matched."""
    vals = sorted(spell_readings(raw))
    lines = ["## Spells (a cache line's round trip between the two first CPUs, read before and "
             "after every measurement)"]
    if not vals:
        return lines + ["(no spell readings: each library's best round per cell is compared)"]
    line = "%d readings, %.0f-%.0f ns (median %.0f)" % (len(vals), vals[0], vals[-1],
                                                         vals[len(vals) // 2])
    if split is None:
        lines.append(line + "; one spell (no two groups %.1fx apart)" % SPELL_MIN_SPREAD)
    else:
        fast = sum(v < split for v in vals)
        lines.append(line + "; split at %.0f ns: fast %d%%, slow %d%%" % (
            split, 100 * fast // len(vals), 100 - 100 * fast // len(vals)))
    tags = collections.Counter(spell_of(r, split) for r in raw)
    lines.append("measurements: %s" % ", ".join("%s %d" % (k or "unread", v)
                                               for k, v in sorted(tags.items(), key=str)))
    cells = {(r["coll"], r["nranks"], r["bytes"]): r["spell"] for r in matched}
    counts = collections.Counter(cells.values())
    lines.append("cells compared within one spell: %s ('any': no spell held Weft and a peer; each "
                 "library's best round there)" % ", ".join(
                     "%s %d" % kv for kv in sorted(counts.items())))
    return lines
