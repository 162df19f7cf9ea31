#!/usr/bin/env python3
"""Checks of the source tree's shape, for CI (ctest label `lint`, tests/lint/CMakeLists.txt).

Each check prints every violation as `file:line: message` and the script exits 1 when any check
found one (2 on a usage error). Checks:

  include_cycles  no cycle among the project's own files through `#include "..."` lines
                  (paths from the repository root, or include/ for the public headers)
  unit_cycles     no cycle among units (a .cc with its .h and its _internal.h) through those
                  lines
  file_length     no source file under src/ or transports/ longer than MAX_LINES lines
  env_reads       getenv / env::get* / env::isSet only in the files of ENV_READERS
  transport_base  transports/base/ holds interfaces: no .cc other than TRANSPORT_BASE_SOURCES
  clang_format    every tracked .cc / .h under FORMAT_DIRS is formatted per .clang-format
  tuning_source   Tuning::fromEnvironment() is called in one place of the library, TUNING_SOURCE
                  (init); everything else takes the Tuning it is given
  core_parts      no file of src/core includes CUDA code (CORE_FORBIDDEN: it lives in src/cuda
                  and transports/cuda), and the communicator's own file nothing of the other
                  parts it owns (the synthesizer): COMMUNICATOR_FORBIDDEN

Usage: scripts/check_tree.py [--root DIR] [CHECK ...]   (no CHECK: all of them)
Python 3 standard library only; the files are the ones git tracks (every file when DIR is not a
git checkout).
"""

import argparse
import os
import re
import subprocess
import sys

# ------------------------------------------------------------------------------------------------
# Allow-lists. The lead shrinks these; each entry is a path from the repository root.
# ------------------------------------------------------------------------------------------------

# Files that may read the environment. The rule: knobs are read through the registry
# (src/common/env.*) by the init code, and handed to the rest as values. This list is what the
# tree needs TODAY; every entry outside the registry is a reader waiting to be moved to init.
ENV_READERS = [
    # the knob registry, and the one function that fills a Tuning from it (src/common/tuning.h)
    "src/common/env.cc",
    "src/common/env.h",
    "src/common/knobs.cc",
    "src/common/knobs.h",
    "src/common/tuning.cc",
    # logging is configured once per process, before any communicator (NCCL_DEBUG, ...)
    "src/common/log.cc",
    # the reduction kernels' instruction set is a property of the process (WEFT_SIMD)
    "src/common/reduce.cc",
    # the CUDA driver library is loaded once per process, like the driver (WEFT_CUDA_DRIVER)
    "src/cuda/driver_api.cc",
    # init from a launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR, ...): not knobs
    "src/api/launch.cc",
    # a command-line tool's own entry point
    "synth/tools/weft_topo.cc",
]

# The folders whose files env_reads looks at (the library and its tools; tests and benchmarks set
# and read their own environment).
ENV_DIRS = ["include", "src", "transports", "algorithms", "synth"]

# The .cc files transports/base/ may hold: the transport registry, nothing else. The base folder
# is the interface every transport implements; shared machinery lives elsewhere.
TRANSPORT_BASE_SOURCES = []

# unit_cycles: a unit is a path without its suffix (and without "_internal"):
# src/core/communicator is communicator.cc, communicator.h and communicator_internal.h. No two
# units may depend on each other, directly or through others.

# file_length: the folders it covers and the limit.
LENGTH_DIRS = ["src", "transports"]
MAX_LINES = 600

# clang_format: the folders it covers.
FORMAT_DIRS = ["include", "src", "transports", "algorithms", "synth", "perf", "tests", "trainers"]

SOURCE_SUFFIXES = (".cc", ".h", ".c", ".cu", ".cuh", ".inc", ".hpp", ".cpp")

# tuning_source: the one file of the library (ENV_DIRS) that calls Tuning::fromEnvironment(),
# besides tuning.{h,cc} themselves: the init-time config reads the environment once and init
# passes the Tuning down; defaults are never read from the environment anywhere else.
TUNING_SOURCE = "src/core/comm_config.cc"

# core_parts: include prefixes no file of src/core may use (CUDA is device execution's,
# src/cuda, and the CUDA transport's: the core reaches it through src/core/device_path.h), and
# those src/core/communicator.cc may not use besides (a communicator owns plan making through its
# own module; it does not build fabrics or simulate plans itself).
CORE_DIR = "src/core/"
CORE_FORBIDDEN = ["src/cuda/", "transports/cuda/"]
COMMUNICATOR = "src/core/communicator.cc"
COMMUNICATOR_FORBIDDEN = ["synth/"]

# ------------------------------------------------------------------------------------------------

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ENV_READ_RE = re.compile(r"\b(?:secure_getenv|getenv)\s*\(|\benv::(?:get\w*|isSet)\s*\(")


class Tree:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.files = self._list_files()
        self.file_set = set(self.files)

    def _list_files(self):
        try:
            out = subprocess.run(["git", "-C", self.root, "ls-files", "-z"], check=True,
                                 capture_output=True).stdout.decode()
            # Files deleted in the working tree but not yet from the index are gone.
            return sorted(f for f in out.split("\0")
                          if f and os.path.isfile(os.path.join(self.root, f)))
        except (OSError, subprocess.CalledProcessError):
            found = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
                for name in filenames:
                    found.append(os.path.relpath(os.path.join(dirpath, name), self.root))
            return sorted(found)

    def sources(self, dirs=None, suffixes=SOURCE_SUFFIXES):
        for f in self.files:
            if not f.endswith(suffixes):
                continue
            if dirs is None or any(f.startswith(d.rstrip("/") + "/") for d in dirs):
                yield f

    def lines(self, path):
        with open(os.path.join(self.root, path), encoding="utf-8", errors="replace") as fh:
            return fh.read().split("\n")


def code_part(line):
    """The line without a // comment (good enough for include and call lines)."""
    at = line.find("//")
    return line if at < 0 else line[:at]


# --- include_cycles ---------------------------------------------------------------------------

def include_graph(tree):
    """{file: [(included file, line number)]} over the project's own files."""
    graph = {}
    for f in tree.sources():
        edges = []
        for number, line in enumerate(tree.lines(f), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            target = m.group(1)
            for candidate in (target, "include/" + target,
                              os.path.normpath(os.path.join(os.path.dirname(f), target))):
                if candidate in tree.file_set:
                    edges.append((candidate, number))
                    break
        graph[f] = edges
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative: the components of more than one file, or one that includes
    itself."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph.get(start, [])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target, _ in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph.get(target, []))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                selfloop = any(t == node for t, _ in graph.get(node, []))
                if len(component) > 1 or selfloop:
                    found.append(sorted(component))
    return found


def cycle_through(graph, component):
    """One cycle inside `component`, as [(node, its edge's payload toward the next node)]."""
    members = set(component)
    start = component[0]
    # Breadth-first from start back to start, inside the component.
    previous = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target, where in graph[node]:
            if target not in members:
                continue
            if target == start:
                path = [(node, where)]
                while previous[path[-1][0]] is not None:
                    path.append(previous[path[-1][0]])
                return list(reversed(path))
            if target not in previous:
                previous[target] = (node, where)
                queue.append(target)
    return [(start, (start, 1))]


def cycle_problems(graph, kind):
    """One problem per edge of one cycle in each strongly connected part of `graph`, whose edges
    are (target, (file, line of the include))."""
    problems = []
    for component in strongly_connected(graph):
        cycle = cycle_through(graph, component)
        chain = " -> ".join([node for node, _ in cycle] + [cycle[0][0]])
        for _, (f, number) in cycle:
            problems.append(f"{f}:{number}: {kind} cycle: {chain}")
    return problems


def check_include_cycles(tree):
    graph = {f: [(target, (f, number)) for target, number in edges]
             for f, edges in include_graph(tree).items()}
    return cycle_problems(graph, "include")


# --- unit_cycles ------------------------------------------------------------------------------

INTERNAL_SUFFIX = "_internal"


def unit_of(path):
    """The unit a file belongs to: its path without the suffix, and without _internal."""
    base = os.path.splitext(path)[0]
    return base[:-len(INTERNAL_SUFFIX)] if base.endswith(INTERNAL_SUFFIX) else base


def unit_graph(tree):
    """{unit: [(included unit, (file, line number))]}, leaving out includes within a unit."""
    graph = {}
    for f, edges in include_graph(tree).items():
        unit = unit_of(f)
        out = graph.setdefault(unit, [])
        for target, number in edges:
            if unit_of(target) != unit:
                out.append((unit_of(target), (f, number)))
    return graph


def check_unit_cycles(tree):
    return cycle_problems(unit_graph(tree), "unit")


# --- file_length ------------------------------------------------------------------------------

def check_file_length(tree):
    problems = []
    for f in tree.sources(LENGTH_DIRS):
        count = len(tree.lines(f))
        if tree.lines(f)[-1] == "":
            count -= 1
        if count > MAX_LINES:
            problems.append(f"{f}:{MAX_LINES + 1}: {count} lines (limit {MAX_LINES})")
    return problems


# --- env_reads --------------------------------------------------------------------------------

def code_matches(tree, dirs, pattern, allowed):
    """(file, line number, line) of every code line under `dirs` that `pattern` finds, outside
    the files of `allowed`."""
    for f in tree.sources(dirs):
        if f in allowed:
            continue
        for number, line in enumerate(tree.lines(f), 1):
            if pattern.search(code_part(line)):
                yield f, number, line


def check_env_reads(tree):
    return [f"{f}:{number}: reads the environment (not in ENV_READERS of scripts/check_tree.py): "
            f"{line.strip()}"
            for f, number, line in code_matches(tree, ENV_DIRS, ENV_READ_RE, set(ENV_READERS))]


# --- transport_base ---------------------------------------------------------------------------

def check_transport_base(tree):
    allowed = set(TRANSPORT_BASE_SOURCES)
    problems = []
    for f in tree.sources(["transports/base"]):
        if f.endswith(".h") or f in allowed:
            continue
        problems.append(f"{f}:1: transports/base/ holds interfaces only; this source is not in "
                        "TRANSPORT_BASE_SOURCES of scripts/check_tree.py")
    return problems


# --- tuning_source ----------------------------------------------------------------------------

FROM_ENV_CALL_RE = re.compile(r"\bTuning::fromEnvironment\s*\(")


def check_tuning_source(tree):
    allowed = {"src/common/tuning.h", "src/common/tuning.cc", TUNING_SOURCE}
    return [f"{f}:{number}: calls Tuning::fromEnvironment() (only {TUNING_SOURCE} may, at init; "
            "take the Tuning given instead)"
            for f, number, _ in code_matches(tree, ENV_DIRS, FROM_ENV_CALL_RE, allowed)]


# --- core_parts -------------------------------------------------------------------------------

def check_core_parts(tree):
    problems = []
    if COMMUNICATOR not in tree.file_set:
        return [f"{COMMUNICATOR}:1: missing (scripts/check_tree.py COMMUNICATOR names it)"]
    for f in sorted(tree.file_set):
        if not f.startswith(CORE_DIR) or not f.endswith(SOURCE_SUFFIXES):
            continue
        for number, line in enumerate(tree.lines(f), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            if any(m.group(1).startswith(prefix) for prefix in CORE_FORBIDDEN):
                problems.append(f"{f}:{number}: includes {m.group(1)}: the core reaches CUDA only "
                                "through src/core/device_path.h")
            elif f == COMMUNICATOR and any(m.group(1).startswith(p) for p in COMMUNICATOR_FORBIDDEN):
                problems.append(f"{f}:{number}: includes {m.group(1)}: the communicator reaches "
                                "synthesis only through the parts it owns")
    return problems


# --- clang_format -----------------------------------------------------------------------------

FORMAT_ERROR_RE = re.compile(r"^(.+?):(\d+):\d+: (?:error|warning): code should be clang-formatted")


def check_clang_format(tree):
    files = list(tree.sources(FORMAT_DIRS, suffixes=(".cc", ".h")))
    binary = os.environ.get("CLANG_FORMAT", "clang-format")
    problems = []
    batch = 50
    for at in range(0, len(files), batch):
        chunk = files[at:at + batch]
        try:
            result = subprocess.run([binary, "--dry-run", "-Werror", *chunk], cwd=tree.root,
                                    capture_output=True, text=True)
        except OSError as e:
            return [f".clang-format:1: cannot run {binary}: {e}"]
        seen = set()
        for line in result.stderr.splitlines():
            m = FORMAT_ERROR_RE.match(line)
            if not m:
                continue
            f = os.path.relpath(os.path.join(tree.root, m.group(1)), tree.root)
            if f in seen:
                continue  # one line per file: the first place it differs
            seen.add(f)
            problems.append(f"{f}:{m.group(2)}: not formatted per .clang-format "
                            f"(clang-format -i {f})")
        if result.returncode != 0 and not seen:
            problems.append(f".clang-format:1: {binary} failed: {result.stderr.strip()[:500]}")
    return problems


CHECKS = {
    "include_cycles": check_include_cycles,
    "unit_cycles": check_unit_cycles,
    "file_length": check_file_length,
    "env_reads": check_env_reads,
    "transport_base": check_transport_base,
    "clang_format": check_clang_format,
    "tuning_source": check_tuning_source,
    "core_parts": check_core_parts,
}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."),
                        help="the repository root (default: this script's parent folder)")
    parser.add_argument("checks", nargs="*", metavar="CHECK",
                        help="checks to run: " + ", ".join(CHECKS) + " (default: all)")
    args = parser.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        parser.error("unknown check(s): " + ", ".join(unknown))
    tree = Tree(args.root)
    failed = False
    for name in args.checks or list(CHECKS):
        problems = CHECKS[name](tree)
        for p in problems:
            print(p)
        print(f"{name}: {'ok' if not problems else f'{len(problems)} violation(s)'}",
              file=sys.stderr)
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
