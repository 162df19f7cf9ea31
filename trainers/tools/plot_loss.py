#!/usr/bin/python3
"""Loss curves from weft-train's CSV logs, several runs overlaid in one PNG.

    plot_loss.py RUN.csv [RUN.csv ...] -o out.png [--label NAME ...] [--title T]

Columns are found by name in each file's header, so both layouts load:
    step,loss,grad_norm,val_loss                          (weft-train before the unified CSV)
    step,loss,val_loss,tokens_per_s,comm_s,compute_s      (the unified CSV; extra columns ignored)
The training loss is drawn as a line, the validation loss (rows where it is present) as markers
on a dashed line of the same colour; with --accuracy, a second panel draws test_accuracy where
the file has that column. Needs matplotlib: run it with Debian's /usr/bin/python3
(python3-matplotlib), as the shebang does.
"""
import argparse
import csv
import math
import os
import sys


def read_run(path):
    """Returns {column: [(step, value), ...]} for loss, val_loss and test_accuracy."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None or "step" not in reader.fieldnames:
            raise ValueError(f"{path}: no header with a 'step' column")
        if "loss" not in reader.fieldnames:
            raise ValueError(f"{path}: no 'loss' column")
        series = {"loss": [], "val_loss": [], "test_accuracy": []}
        for row in reader:
            step = int(row["step"])
            for name, points in series.items():
                text = (row.get(name) or "").strip()
                if not text:
                    continue
                value = float(text)
                if math.isfinite(value):
                    points.append((step, value))
    return series


def smooth(points, window):
    """Running mean over `window` points (1: unchanged), to make noisy per-step losses readable."""
    if window <= 1 or len(points) < window:
        return points
    out, total = [], 0.0
    for i, (step, value) in enumerate(points):
        total += value
        if i >= window:
            total -= points[i - window][1]
        if i >= window - 1:
            out.append((step, total / window))
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="+", help="weft-train CSV logs")
    parser.add_argument("-o", "--output", required=True, help="PNG to write")
    parser.add_argument("--label", action="append", default=[],
                        help="legend name of each CSV in order (default: the file name)")
    parser.add_argument("--title", default="")
    parser.add_argument("--smooth", type=int, default=1,
                        help="running mean over N steps of the training loss (default 1: none)")
    parser.add_argument("--accuracy", action="store_true",
                        help="second panel with test_accuracy")
    parser.add_argument("--dpi", type=int, default=80)
    args = parser.parse_args(argv)
    if args.label and len(args.label) != len(args.csv):
        parser.error("give one --label per CSV, or none")
    labels = args.label or [os.path.splitext(os.path.basename(p))[0] for p in args.csv]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [read_run(p) for p in args.csv]
    panels = 2 if args.accuracy else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 * panels, 4.0), squeeze=False)
    loss_axis = axes[0][0]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (run, label) in enumerate(zip(runs, labels)):
        colour = colours[i % len(colours)]
        train = smooth(run["loss"], args.smooth)
        if train:
            loss_axis.plot(*zip(*train), color=colour, linewidth=1.0, alpha=0.8,
                           label=f"{label} train")
        if run["val_loss"]:
            loss_axis.plot(*zip(*run["val_loss"]), color=colour, linestyle="--", marker="o",
                           markersize=3, label=f"{label} validation")
        if args.accuracy and run["test_accuracy"]:
            axes[0][1].plot(*zip(*run["test_accuracy"]), color=colour, marker="o", markersize=3,
                            label=label)
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss")
    loss_axis.grid(True, alpha=0.3)
    loss_axis.legend(fontsize=7)
    if args.title:
        loss_axis.set_title(args.title, fontsize=9)
    if args.accuracy:
        axes[0][1].set_xlabel("step")
        axes[0][1].set_ylabel("test accuracy")
        axes[0][1].grid(True, alpha=0.3)
        axes[0][1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.output, dpi=args.dpi)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError) as e:
        print(f"plot_loss.py: {e}", file=sys.stderr)
        sys.exit(1)
