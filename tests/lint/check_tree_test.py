#!/usr/bin/env python3
"""scripts/check_tree.py on small trees written for each case: every check finds what it is
meant to find, with file and line, and passes a tree without it."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "check_tree.py")


def run(root, *checks):
    result = subprocess.run([sys.executable, "-B", SCRIPT, "--root", root, *checks],
                            capture_output=True, text=True)
    return result.returncode, result.stdout.splitlines()


class CheckTreeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name  # not a git checkout: every file counts

    def tearDown(self):
        self.dir.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def test_include_cycle_is_reported_at_each_include_of_it(self):
        self.write("src/a/x.h", '#include "src/a/y.h"\n')
        self.write("src/a/y.h", '// one\n#include "src/a/x.h"\n')
        self.write("src/a/z.cc", '#include "src/a/x.h"\n')
        rc, out = run(self.root, "include_cycles")
        self.assertEqual(rc, 1)
        self.assertEqual(sorted(line.split(": ")[0] for line in out), ["src/a/x.h:1", "src/a/y.h:2"])
        self.assertIn("src/a/x.h -> src/a/y.h -> src/a/x.h", out[0])

    def test_include_chain_without_cycle_passes(self):
        self.write("src/a/x.h", '#include "src/a/y.h"\n#include "nccl.h"\n')
        self.write("src/a/y.h", "#include <vector>\n")
        self.write("include/nccl.h", '#include "src/a/y.h"\n')
        self.assertEqual(run(self.root, "include_cycles"), (0, []))

    def test_unit_cycle_is_reported_at_each_include_of_it(self):
        # a.cc -> b.h and b.cc -> a_internal.h: no file cycle, but units a and b include each other.
        self.write("src/a.h", "int a();\n")
        self.write("src/a_internal.h", '#include "src/a.h"\n')
        self.write("src/a.cc", '#include "src/a_internal.h"\n#include "src/b.h"\n')
        self.write("src/b.h", "int b();\n")
        self.write("src/b.cc", '#include "src/b.h"\n#include "src/a_internal.h"\n')
        self.assertEqual(run(self.root, "include_cycles"), (0, []))
        rc, out = run(self.root, "unit_cycles")
        self.assertEqual(rc, 1)
        self.assertEqual(sorted(line.split(": ")[0] for line in out), ["src/a.cc:2", "src/b.cc:2"])
        self.assertIn("unit cycle: src/a -> src/b -> src/a", out[0])

    def test_units_without_cycle_pass(self):
        self.write("src/a.h", "int a();\n")
        self.write("src/a.cc", '#include "src/a.h"\n#include "src/b.h"\n')
        self.write("src/b.h", "int b();\n")
        self.write("src/b.cc", '#include "src/b.h"\n')
        self.assertEqual(run(self.root, "unit_cycles"), (0, []))

    def test_long_source_file_fails_only_under_src_and_transports(self):
        self.write("src/long.cc", "int x;\n" * 601)
        self.write("src/fits.cc", "int x;\n" * 600)
        self.write("tests/long.cc", "int x;\n" * 900)
        rc, out = run(self.root, "file_length")
        self.assertEqual(rc, 1)
        self.assertEqual(out, ["src/long.cc:601: 601 lines (limit 600)"])

    def test_environment_read_outside_the_allow_list(self):
        self.write("src/core/reader.cc", "// getenv(\"A\") in a comment\nauto v = env::getInt(\"B\");\n")
        self.write("src/common/env.cc", 'const char* v = getenv("A");\n')
        self.write("tests/t.cc", 'const char* v = getenv("A");\n')
        rc, out = run(self.root, "env_reads")
        self.assertEqual(rc, 1)
        self.assertEqual(len(out), 1)
        self.assertTrue(out[0].startswith("src/core/reader.cc:2: reads the environment"))

    def test_transport_base_holds_headers_only(self):
        self.write("transports/base/transport.h", "int r;\n")
        self.assertEqual(run(self.root, "transport_base"), (0, []))
        self.write("transports/base/helper.cc", "int h;\n")
        rc, out = run(self.root, "transport_base")
        self.assertEqual(rc, 1)
        self.assertEqual([line.split(": ")[0] for line in out], ["transports/base/helper.cc:1"])

    @unittest.skipIf(subprocess.run(["which", "clang-format"], capture_output=True).returncode,
                     "clang-format is not installed")
    def test_unformatted_file_is_named(self):
        self.write(".clang-format", "BasedOnStyle: Google\nColumnLimit: 100\n")
        self.write("src/good.cc", "int f() { return 1; }\n")
        self.assertEqual(run(self.root, "clang_format"), (0, []))
        self.write("src/bad.cc", "int f() { return 1; }\nint   g( ) {return 2;}\n")
        rc, out = run(self.root, "clang_format")
        self.assertEqual(rc, 1)
        self.assertEqual(len(out), 1)
        self.assertTrue(out[0].startswith("src/bad.cc:2: not formatted"))

    def test_tuning_from_environment_only_in_the_init_config(self):
        self.write("src/core/comm_config.cc", "Tuning t = Tuning::fromEnvironment();\n")
        self.write("src/common/tuning.cc", "Tuning Tuning::fromEnvironment() { return {}; }\n")
        self.write("tests/t.cc", "auto t = Tuning::fromEnvironment();\n")
        self.write("src/topo/d.h", "// Tuning::fromEnvironment() in a comment\nint x;\n")
        self.assertEqual(run(self.root, "tuning_source"), (0, []))
        self.write("src/topo/d.h", "void f(const Tuning& t = Tuning::fromEnvironment());\n")
        rc, out = run(self.root, "tuning_source")
        self.assertEqual(rc, 1)
        self.assertEqual(len(out), 1)
        self.assertTrue(out[0].startswith("src/topo/d.h:1: calls Tuning::fromEnvironment()"))

    def test_core_includes_no_cuda_and_communicator_none_of_its_parts(self):
        self.write("src/core/communicator.cc",
                   '#include "src/core/communicator.h"\n#include "src/core/device_path.h"\n')
        self.write("src/core/group.cc", '#include "src/core/device_path.h"\n')
        self.write("src/cuda/gpu_path.cc", '#include "src/core/communicator.h"\n')
        self.assertEqual(run(self.root, "core_parts"), (0, []))
        self.write("src/core/communicator.cc", '#include "src/core/communicator.h"\n'
                   '#include "synth/model/simulator.h"\n#include "src/cuda/device_world.h"\n')
        self.write("src/core/group.cc", '#include "transports/cuda/ipc.h"\n')
        self.write("src/core/plan_maker.cc", '#include "synth/model/simulator.h"\n')
        rc, out = run(self.root, "core_parts")
        self.assertEqual(rc, 1)
        self.assertEqual([line.split(": ")[0] for line in out],
                         ["src/core/communicator.cc:2", "src/core/communicator.cc:3",
                          "src/core/group.cc:1"])

    def test_unknown_check_is_a_usage_error(self):
        rc, _ = run(self.root, "no_such_check")
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
