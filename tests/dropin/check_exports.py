#!/usr/bin/env python3
"""Every function NCCL's header declares (and its pncclX twin) is exported by our library."""
import re
import subprocess
import sys

header, library = sys.argv[1], sys.argv[2]
text = open(header).read()
declared = set(re.findall(r"\b(p?nccl[A-Z]\w*)\s*\(", text))
# Macros and types look like calls in places; keep names the header declares as functions.
declared = {n for n in declared if re.search(r"(ncclResult_t|const char\s*\*)\s+" + n + r"\s*\(", text)}
out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
missing = sorted(declared - exported)
print(f"{len(declared)} functions declared in {header}; {len(declared & exported)} exported")
if missing:
    print("missing:", " ".join(missing))
    sys.exit(1)
soname = subprocess.run(["objdump", "-p", library], capture_output=True, text=True, check=True).stdout
if library.endswith("libnccl.so.2") and "SONAME               libnccl.so.2" not in soname:
    print("wrong SONAME")
    sys.exit(1)
