#!/usr/bin/env python3
"""Checks tests/gpu/run.sh's time budget without a GPU: the step limits between its "BEGIN STEP
LIMITS" and "END STEP LIMITS" lines ("[name]=seconds") sum to at most the budget (360 s: the
check must finish within 6 minutes of the GPU machine's time, its build included), every step
the script starts (begin_step NAME, or begin_step "correct_$mode" over its modes) has a limit,
and every limit belongs to a step the script starts, once.

Usage: check_budget.py [RUN_SH] [BUDGET_S]   Exit status 0: within the budget; 1: not.
"""
import os
import re
import sys

BUDGET_S = 360


def limits(text):
    """{name: seconds} from the table, in order, or raises ValueError."""
    m = re.search(r"^# BEGIN STEP LIMITS.*?$(.*?)^# END STEP LIMITS", text, re.M | re.S)
    if not m:
        raise ValueError("no BEGIN STEP LIMITS / END STEP LIMITS table")
    table = {}
    for line in m.group(1).splitlines():
        entry = re.match(r"\s*\[(\w+)\]=(\d+)\s*(#.*)?$", line)
        if entry:
            if entry.group(1) in table:
                raise ValueError(f"step {entry.group(1)} has two limits")
            table[entry.group(1)] = int(entry.group(2))
        elif line.strip() and not line.strip().startswith(("#", "declare", ")")):
            raise ValueError(f"unreadable line in the table: {line!r}")
    if not table:
        raise ValueError("the table is empty")
    return table


def started_steps(text):
    """The step names the script starts with begin_step, a "$mode" loop expanded."""
    names = []
    for m in re.finditer(r"^\s*begin_step\s+(\S+)", text, re.M):
        arg = m.group(1).strip('"')
        if "$" not in arg:
            names.append(arg)
            continue
        # begin_step "prefix_$var" inside `for var in a b; do`: the loop's words.
        var = re.search(r"\$\{?(\w+)\}?", arg).group(1)
        loop = None
        for lm in re.finditer(rf"^\s*for\s+{var}\s+in\s+([^;]+);", text[:m.start()], re.M):
            loop = lm
        if not loop:
            raise ValueError(f"begin_step {arg}: no `for {var} in ...` before it")
        for word in loop.group(1).split():
            names.append(re.sub(r"\$\{?" + var + r"\}?", word, arg))
    return names


def problems(text, budget):
    out = []
    try:
        table = limits(text)
    except ValueError as e:
        return [str(e)]
    total = sum(table.values())
    if total > budget:
        out.append(f"the step limits sum to {total} s, more than the {budget} s budget")
    try:
        steps = started_steps(text)
    except ValueError as e:
        return out + [str(e)]
    for name in steps:
        if name not in table:
            out.append(f"step {name} is started but has no limit")
    for name in table:
        count = steps.count(name)
        if count != 1:
            out.append(f"step {name} has a limit but is started {count} times")
    if list(table) != [s for s in steps if s in table]:
        out.append("the table's order is not the order the steps run in")
    return out


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "run.sh")
    budget = int(argv[2]) if len(argv) > 2 else BUDGET_S
    with open(path) as f:
        text = f.read()
    found = problems(text, budget)
    if found:
        for p in found:
            print(f"check_budget: {p}")
        return 1
    table = limits(text)
    print(" + ".join(f"{k} {v}" for k, v in table.items()) +
          f" = {sum(table.values())} s <= {budget} s: within the budget")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
