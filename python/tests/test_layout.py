# SPDX-License-Identifier: BSD-3-Clause
"""The binding's ctypes mirrors of ndf.h's structs (ndfilt/_lib.py) against the compiler's
layout of the header: every struct, its size, and every field's offset and size, with no field
missing on either side. usage: ABI_LAYOUT=path/to/abi_layout python3 test_layout.py"""
import ctypes as C
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ndfilt import _lib  # noqa: E402

MIRRORS = {"ndf_place": _lib.Place, "ndf_array": _lib.Array, "ndf_context_opts": _lib.ContextOpts,
           "ndf_correlate1d_opts": _lib.Correlate1dOpts, "ndf_sepfilter_opts": _lib.SepfilterOpts,
           "ndf_gaussian_opts": _lib.GaussianOpts, "ndf_correlate_opts": _lib.CorrelateOpts,
           "ndf_ks_opts": _lib.KsOpts, "ndf_rank_opts": _lib.RankOpts}


def main():
    out = subprocess.run([os.environ["ABI_LAYOUT"]], capture_output=True, text=True,
                         check=True).stdout
    fails, seen = [], {k: set() for k in MIRRORS}
    for line in out.splitlines():
        struct, field, offset, size = line.split()
        mirror = MIRRORS[struct]
        if field == "-":
            if C.sizeof(mirror) != int(size):
                fails.append(f"{struct}: C size {size}, ctypes {C.sizeof(mirror)}")
            continue
        seen[struct].add(field)
        f = getattr(mirror, field, None)
        if f is None:
            fails.append(f"{struct}.{field}: missing from {mirror.__name__}")
        elif (f.offset, f.size) != (int(offset), int(size)):
            fails.append(f"{struct}.{field}: C offset {offset} size {size}, ctypes offset "
                         f"{f.offset} size {f.size}")
    for struct, mirror in MIRRORS.items():
        for name, _ in mirror._fields_:
            if name not in seen[struct]:
                fails.append(f"{mirror.__name__}.{name}: not a field of {struct} (or not listed "
                             "in tests/abi_layout.c)")
    for f in fails:
        print("FAIL", f)
    print(f"layout checks: {len(MIRRORS)} structs, {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
