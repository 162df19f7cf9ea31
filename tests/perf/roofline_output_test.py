#!/usr/bin/env python3
"""The roofline columns of the perf tools (perf/roofline.h) on device memory, against the fake
driver (WEFT_CUDA_DRIVER, whose "GPU" runs on host threads and reports no memory clock):
  --hbm-gbs 1000   the "# Roofline" line, the three extra header cells, and on every row the
                   bound (ranks on the GPU x traffic x size / bandwidth) and frac = bound / time;
  no --hbm-gbs     the driver gives no bandwidth: "# Roofline: none (...)", no extra columns;
  --host           host memory: no roofline line and no extra columns (nccl-tests' format).
Usage: roofline_output_test.py ALL_REDUCE_PERF ALL_GATHER_PERF   Exit status 0: passed."""
import re
import subprocess
import sys

SWEEP = ["-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-c", "1", "-t", "2"]
# Per rank and byte of size, out of place: allreduce reads and writes it once; allgather with 2
# ranks reads its half and writes the whole output.
TRAFFIC = {"all_reduce_perf": 2.0, "all_gather_perf": 1.5}


def run(tool, extra):
    out = subprocess.run([tool] + SWEEP + extra, capture_output=True, text=True, timeout=240)
    if out.returncode != 0:
        sys.exit(f"FAIL: {tool} {' '.join(extra)} exited {out.returncode}\n{out.stdout}"
                 f"{out.stderr}")
    return out.stdout.splitlines()


def rows(lines):
    return [line.split() for line in lines if re.match(r"^ +[0-9]+ +[0-9]+ ", line)]


def check(cond, what, lines):
    if not cond:
        print("\n".join(lines))
        sys.exit(f"FAIL: {what}")


def main(argv):
    for tool in argv[1:]:
        name = tool.rsplit("/", 1)[-1]
        lines = run(tool, ["--hbm-gbs", "1000"])
        check(any(line.startswith("# Buffers in device memory") for line in lines),
              f"{name}: not on device memory", lines)
        head = [line for line in lines if line.startswith("# Roofline: ")]
        check(len(head) == 1 and "HBM 1000 GB/s (--hbm-gbs); 2 rank(s) on the GPU" in head[0],
              f"{name}: no roofline line for 2 ranks at 1000 GB/s", lines)
        check(any(line.rstrip().endswith("bound   frac   frac") for line in lines),
              f"{name}: no roofline header cells", lines)
        table = rows(lines)
        check(len(table) == 5, f"{name}: {len(table)} rows, not 5 (8 B to 32 KiB)", lines)
        for r in table:
            check(len(r) == 16 and r[8] == "0" and r[12] == "0", f"{name}: bad row {r}", lines)
            size, us, bound, frac = int(r[0]), float(r[5]), float(r[13]), float(r[14])
            want = 2 * TRAFFIC[name] * size / 1000e3
            check(abs(bound - want) <= 0.006 + 0.01 * want,
                  f"{name}: bound {bound} us for {size} B, expected {want:.4f}", lines)
            check(abs(frac - want / us) <= 0.0006 + 0.01 * frac,
                  f"{name}: frac {frac} at {size} B, expected {want / us:.4f}", lines)
        lines = run(tool, [])
        check(any(re.match(r"^# Roofline: none \(.+\)$", line) for line in lines),
              f"{name}: no 'Roofline: none' line where the driver gives no bandwidth", lines)
        check(all(len(r) == 13 for r in rows(lines)), f"{name}: extra columns without a bandwidth",
              lines)
        lines = run(tool, ["--host", "--hbm-gbs", "1000"])
        check(not any("Roofline" in line for line in lines), f"{name}: roofline on host memory",
              lines)
        check(all(len(r) == 13 for r in rows(lines)), f"{name}: extra columns on host memory",
              lines)
        print(f"{name}: roofline output OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
