#!/usr/bin/env python3
"""scripts/bench/size.py — the pxagent binary's size and each dependency's share of its code.

Why this exists: a remote op's peak memory is mostly the binary's pages the kernel maps (its heap
stays under 2 MiB), so the binary's size, and what makes it up, is what issue 27 item 5 asks to
see. This reads the symbol table (`nm -S -C`, so run it on an unstripped build) and sums the
sizes of the functions and data of each crate, by the crate name that starts the demangled
symbol (`regex_automata::…`, `<tokio::…>`), C code (aws-lc, libc stubs) under "C and other".
Information only.

Usage: scripts/bench/size.py [BINARY]   (default target/release/pxagent)
"""
import collections
import os
import re
import subprocess
import sys

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/pxagent"
out = subprocess.run(["nm", "-S", "-C", "--size-sort", binary], capture_output=True, text=True, check=True).stdout
crate_re = re.compile(r"^(?:<+|&|\*const |\*mut |dyn |impl )*([A-Za-z_][A-Za-z0-9_]*)::")
shares = collections.Counter()
total = 0
for line in out.splitlines():
    parts = line.split(None, 3)
    if len(parts) < 4:
        continue
    size = int(parts[1], 16)
    total += size
    m = crate_re.match(parts[3])
    crate = m.group(1) if m else "C and other"
    if crate in ("core", "alloc", "std"):
        crate = "std (core, alloc, std)"
    shares[crate] += size
text = subprocess.run(["size", "-A", binary], capture_output=True, text=True, check=True).stdout
text_size = sum(int(l.split()[1]) for l in text.splitlines() if l.startswith((".text", ".rodata")))
print(f"binary: {binary}, {os.path.getsize(binary) / 1e6:.1f} MB on disk, .text+.rodata {text_size / 1e6:.1f} MB")
print(f"symbols with a size: {total / 1e6:.2f} MB; by crate (top 20):")
for crate, size in shares.most_common(20):
    print(f"  {crate:28} {size / 1e6:6.2f} MB  {100 * size / total:5.1f}%")
