"""The files of one run (results.csv, mem.csv, header.txt, failures.txt) and the report made from
them: tables on stdout, tables.txt, summary.md and one plot per collective and rank count."""

import csv
import os

from .bounds import all_bounds_lines, bound_lines, copy_ceiling_lines
from .common import COLLS, fmt_size, good, index_results, positive
from .spells import best_of_rounds, spell_lines, spell_matched, spell_split
from .tables import goals_lines, ratio_table, summary_table


RESULT_FIELDS = ["lib", "algo", "label", "coll", "nranks", "bytes", "time_us", "algbw", "busbw",
                 "wrong", "iters", "round", "spell_ns", "spell_after_ns"]


MEM_FIELDS = ["when", "test", "threads", "bytes", "reps", "time_us", "copy_GBps", "bw_GBps",
              "traffic_GBps", "cached_GBps", "streamed_GBps"]


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.6g" % r[k] if isinstance(r.get(k), float) else r.get(k, ""))
                        for k in fields})


def read_results(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("nranks", "bytes", "iters"):
                r[k] = int(r[k])
            for k in ("time_us", "algbw", "busbw"):
                r[k] = float(r[k])
            r["wrong"] = int(r["wrong"]) if r["wrong"] != "" else ""
            r["round"] = int(r.get("round") or 1)
            for k in ("spell_ns", "spell_after_ns"):
                r[k] = positive(r.get(k))
            rows.append(r)
    return rows


def plot(by, out_dir, bound, log):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        log("no plots: %s (install python3-matplotlib, run with /usr/bin/python3)" % e)
        return []
    paths = []
    colors = {"weft": "black", "weft_inplace": "dimgray", "openmpi": "tab:blue",
              "mpich": "tab:orange", "gloo_ring": "tab:green", "gloo_ring_chunked": "tab:olive",
              "gloo_halving_doubling": "tab:cyan", "gloo": "tab:green"}
    for (coll, n), rows in sorted(by.items()):
        labels = []
        for r in rows:
            if r["label"] not in labels:
                labels.append(r["label"])
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 9), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
        for label in labels:
            pts = sorted((r["bytes"], r["busbw"], r["time_us"]) for r in rows
                         if r["label"] == label and good(r))
            if not pts:
                continue
            xs = [p[0] for p in pts]
            style = {"color": colors.get(label), "marker": "o", "markersize": 3}
            if label.startswith("weft"):
                style["linewidth"] = 2.2 if label == "weft" else 1.2
                style["linestyle"] = "-" if label == "weft" else "--"
            ax.plot(xs, [p[1] for p in pts], label=label, **style)
            ax2.plot(xs, [p[2] for p in pts], label=label, **style)
        if coll == "allreduce" and n == 2 and bound:
            ax.axhline(bound, color="red", linestyle=":", linewidth=1,
                       label="memory bound (memcpy traffic / 5)")
        ax.set_xscale("log", base=2)
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title("%s, %d ranks (host memory, float32; Weft vs peers, one run)" % (coll, n))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.set_ylabel("time per call (us)")
        ax2.set_xlabel("size (bytes)")
        ax2.grid(True, which="both", alpha=0.3)
        ticks = sorted({r["bytes"] for r in rows})
        ticks = [t for i, t in enumerate(ticks) if i % max(1, len(ticks) // 12) == 0]
        ax2.set_xticks(ticks)
        ax2.set_xticklabels([fmt_size(t) for t in ticks], rotation=45, fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, "busbw_%s_n%d.png" % (coll, n))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


def report(out_dir, log, plots):
    """Tables (stdout, tables.txt, summary.md) and plots from the files of one run."""
    raw = read_results(os.path.join(out_dir, "results.csv"))
    split = spell_split(raw)
    results = spell_matched(raw, split)
    by_any_spell = index_results(best_of_rounds(raw))
    with open(os.path.join(out_dir, "mem.csv"), newline="") as f:
        mem_rows = list(csv.DictReader(f))
    def lines(name):
        path = os.path.join(out_dir, name)
        return open(path).read().splitlines() if os.path.exists(path) else []

    text = lines("header.txt") + [""]
    failures = lines("failures.txt")
    colls = [c for c in COLLS if any(r["coll"] == c for r in results)]
    ranks = sorted({r["nranks"] for r in results})
    by = index_results(results)

    reps = sorted({r.get("reps") or "?" for r in mem_rows})
    text.append("## Memory (mem_bench, 256 MiB, best of %s; at the start and the end of the run)"
                % ",".join(reps))
    for when in sorted({r["when"] for r in mem_rows if r["test"] == "copyat"}, reverse=True):
        text.append("%-5s copy at a footprint per thread, 2 threads (GB/s copied): %s" % (when, ", ".join(
            "%s %s" % (fmt_size(int(r["bytes"])), r["copy_GBps"])
            for r in mem_rows if r["test"] == "copyat" and r["when"] == when)))
    for r in mem_rows:
        if r["test"] == "copyat":
            continue
        text.append("%-5s %-6s %d thread%s: %7s GB/s %-13s %7s GB/s memory traffic" % (
            r["when"], r["test"], int(r["threads"]), "s" if int(r["threads"]) > 1 else " ",
            r.get("copy_GBps") or r.get("bw_GBps"),
            "copied," if r["test"] == "memcpy" else "(bytes of a),", r["traffic_GBps"]))
    text.append("")
    text += spell_lines(raw, split, results) + [""]
    for coll in colls:
        for n in ranks:
            if (coll, n) in by:
                text += ratio_table(coll, n, by[(coll, n)], by_any_spell[(coll, n)]) + [""]
    blines, bound = bound_lines(by, mem_rows)
    text += blines + [""]
    text += all_bounds_lines(by, mem_rows, colls, ranks) + [""]
    text += copy_ceiling_lines(by, mem_rows, colls, ranks) + [""]
    text += goals_lines(by, mem_rows, colls, ranks, "Goals, checked on this run") + [""]
    text += goals_lines(by_any_spell, mem_rows, colls, ranks,
                        "The same goals on each library's best round whatever the spell "
                        "(for reference)") + [""]
    text.append("## Summary (Weft out-of-place, broadcast in-place; best peer per size; ratio > 1: Weft faster)")
    text += summary_table(by, colls, ranks) + [""]
    if failures:
        text.append("## Failed runs")
        text += ["- " + x for x in failures] + [""]
    out = "\n".join(text)
    print(out)
    with open(os.path.join(out_dir, "tables.txt"), "w") as f:
        f.write(out + "\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(summary_table(by, colls, ranks)) + "\n")
    if plots:
        paths = plot(by, out_dir, bound, log)
        log("%d plots in %s" % (len(paths), out_dir))
