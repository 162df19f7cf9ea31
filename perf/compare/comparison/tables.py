"""The ratio tables, the performance goals checked on a run, and the summary table."""

from .bounds import mem_best, out_of_room
from .common import (SUMMARY_SIZES, best_peer_at, fmt_bw, fmt_ratio, fmt_size, fmt_us, good,
                     latency_row, weft_at)


def ratio_table(coll, n, rows, any_spell_rows):
    """Per size: Weft and the best peer in the cell's spell, their ratio, and the ratio of each
    library's best round whatever the spell."""
    lines = []
    sizes = sorted({r["bytes"] for r in rows})
    lines.append("## %s, %d ranks   (busbw GB/s; ratio = weft / best peer, > 1: Weft faster)" %
                 (coll, n))
    lines.append("%10s  %9s  %-24s %9s  %7s  %-5s  %9s" % ("size", "weft", "best peer", "busbw",
                                                          "ratio", "spell", "any spell"))
    for size in sizes:
        w = weft_at(rows, size)
        p = best_peer_at(rows, size, "busbw")
        ratio = w["busbw"] / p["busbw"] if w and p and p["busbw"] > 0 else None
        wa, pa = weft_at(any_spell_rows, size), best_peer_at(any_spell_rows, size, "busbw")
        any_ratio = wa["busbw"] / pa["busbw"] if wa and pa and pa["busbw"] > 0 else None
        spell = (w or p or {}).get("spell", "-")
        flag = ""
        if w and not good(w):
            flag = "  WEFT WRONG=%s" % w["wrong"]
        bad_peers = [r["label"] for r in rows
                     if r["lib"] != "weft" and r["bytes"] == size and not good(r)]
        if bad_peers:
            flag += "  (wrong results, excluded: %s)" % ",".join(bad_peers)
        lines.append("%10s  %9s  %-24s %9s  %7s  %-5s  %9s%s" % (
            fmt_size(size), fmt_bw(w["busbw"]) if w else "-", p["label"] if p else "-",
            fmt_bw(p["busbw"]) if p else "-", fmt_ratio(ratio), spell, fmt_ratio(any_ratio), flag))
    lat = latency_row(rows)
    if lat:
        size, w, p = lat
        lines.append("latency at %d B (us): weft %s | best peer %s %s | ratio best_peer_time/weft_time %s"
                     % (size, fmt_us(w["time_us"]), p["label"] if p else "-",
                        fmt_us(p["time_us"]) if p else "-",
                        fmt_ratio(p["time_us"] / w["time_us"]) if p and w["time_us"] > 0 else "-"))
    return lines


def ratios_over(rows, lo, hi=None):
    """(size, ratio) of Weft's busbw over the best peer's at every size in [lo, hi]."""
    out = []
    for size in sorted({r["bytes"] for r in rows if r["bytes"] >= lo and (hi is None or r["bytes"] <= hi)}):
        w, p = weft_at(rows, size), best_peer_at(rows, size, "busbw")
        if w and p and p["busbw"] > 0 and good(w):
            out.append((size, w["busbw"] / p["busbw"]))
    return out


def goal_line(name, pairs, want, fmt="%.2f"):
    """One goal: met when every (size, value) reaches `want`; names the worst size."""
    if not pairs:
        return "- %s: no data" % name
    worst = min(pairs, key=lambda x: x[1])
    met = worst[1] >= want
    return "- %s: %s (least %s at %s; %d sizes)" % (
        name, "met" if met else "NOT met", fmt % worst[1], fmt_size(worst[0]), len(pairs))


def goals_lines(by, mem_rows, colls, ranks, title):
    """The performance goals of the perf issue, each checked on this run's numbers."""
    lines = ["## %s (ratio = Weft busbw / best peer busbw; latency ratio = best peer time / Weft "
             "time)" % title]
    MI = 1 << 20

    def latency(n, peer=None):
        rows = by.get(("allreduce", n), [])
        lat = latency_row(rows)
        if not lat or not lat[1]:
            return []
        size, w = lat[0], lat[1]
        cands = [r for r in rows if r["lib"] != "weft" and r["bytes"] == size and good(r) and
                 (peer is None or r["lib"] == peer)]
        if not cands:
            return []
        p = min(cands, key=lambda r: r["time_us"])
        return [(size, p["time_us"] / w["time_us"])]

    if ("allreduce", 2) in by:
        rows = by[("allreduce", 2)]
        lines.append(goal_line("2 ranks, 8 B allreduce latency no worse than the best peer",
                               latency(2), 1.0))
        lines.append(goal_line("2 ranks, allreduce 64K-1M >= 1.5x", ratios_over(rows, 64 << 10, MI), 1.5))
        lines.append(goal_line("2 ranks, allreduce >= 16M >= 2.5x", ratios_over(rows, 16 * MI), 2.5))
        copy2 = mem_best(mem_rows, "memcpy", 2, "traffic_GBps")
        if copy2:
            bound = copy2 / 5
            share = [(size, w["busbw"] / bound) for size in sorted({r["bytes"] for r in rows})
                     if size >= 16 * MI for w in [weft_at(rows, size)] if w]
            lines.append(goal_line("2 ranks, allreduce >= 16M at >= 70%% of the memory bound "
                                   "(%.2f GB/s)" % bound, share, 0.70, "%.2f"))
    if ("allreduce", 4) in by:
        rows = by[("allreduce", 4)]
        lines.append(goal_line("4 ranks, 8 B allreduce latency no worse than Open MPI's",
                               latency(4, "openmpi"), 1.0))
        lines.append(goal_line("4 ranks, allreduce >= 16M >= 2x", ratios_over(rows, 16 * MI), 2.0))
    for coll in colls:
        if coll == "allreduce":
            continue
        for n in ranks:
            if (coll, n) in by:
                lines.append(goal_line("%s, %d ranks, >= 1M >= 1.5x" % (coll, n),
                                       ratios_over(by[(coll, n)], MI), 1.5))
                short = out_of_room(by, mem_rows, coll, n, 1.5)
                if short:
                    lines.append("  beyond any algorithm at %s: the copy ceiling is under 1.5x "
                                 "the best peer there" % ", ".join(short))
    slow = []
    cells = 0
    for coll in colls:
        for n in ranks:
            for size, ratio in ratios_over(by.get((coll, n), []), 0):
                cells += 1
                if ratio < 0.9:
                    slow.append("%s/%d/%s %.2f" % (coll, n, fmt_size(size), ratio))
    lines.append("- no size slower than the best peer by more than 10%%: %s (%d of %d cells under "
                 "0.9%s)" % ("met" if not slow else "NOT met", len(slow), cells,
                             ": " + ", ".join(slow) if slow else ""))
    return lines


def summary_table(by, colls, ranks):
    """Markdown: per collective and rank count, the small-message latency and busbw ratios."""
    head = ["collective", "ranks", "latency weft / best peer (us)", "lat ratio"]
    head += ["%s weft / best (GB/s)" % fmt_size(s) for s in SUMMARY_SIZES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for coll in colls:
        for n in ranks:
            rows = by.get((coll, n))
            if not rows:
                continue
            cells = [coll, str(n)]
            lat = latency_row(rows)
            if lat and lat[1] and lat[2]:
                size, w, p = lat
                cells.append("%s / %s %s @%d B" % (fmt_us(w["time_us"]), fmt_us(p["time_us"]),
                                                   p["label"], size))
                cells.append(fmt_ratio(p["time_us"] / w["time_us"]))
            else:
                cells += ["-", "-"]
            for size in SUMMARY_SIZES:
                w, p = weft_at(rows, size), best_peer_at(rows, size, "busbw")
                if w and p and p["busbw"] > 0:
                    cells.append("%s / %s %s = **%.2f**" % (fmt_bw(w["busbw"]), fmt_bw(p["busbw"]),
                                                            p["label"], w["busbw"] / p["busbw"]))
                else:
                    cells.append("-")
            lines.append("| " + " | ".join(cells) + " |")
    return lines
