#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""cli_corpus_check.py - the ndfilt tool over the readers' corpus (fuzz/corpus) and corrupt
variants of every file in it: truncated at several points, bytes flipped, a gzip trailer cut.

Each file is given to `ndfilt info` and `ndfilt gauss` (as input, and the kernel corpus as
`conv --kernel`). The tool must succeed or fail with its own exit codes (2 usage, 3 a file it
cannot read), never crash, hang or trip a sanitizer: in the ASan + UBSan build this is the
CLI's run over the corrupt-file corpus. NDF_CORPUS_VARIANTS sets the variants per file.
usage: NDFILT=path/to/ndfilt python3 cli_corpus_check.py
"""
import os
import random
import subprocess
import sys
import tempfile

NDFILT = os.environ["NDFILT"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus")
VARIANTS = int(os.environ.get("NDF_CORPUS_VARIANTS", "6"))
SAN = "exitcode=86:detect_leaks=1:abort_on_error=0"
FAIL = []


def variants(data, rng):
    """The file itself and corrupt copies of it."""
    yield "as is", data
    n = len(data)
    for frac in (0.1, 0.5, 0.9):
        yield f"cut at {frac:.0%}", data[:int(n * frac)]
    if data[:2] == b"\x1f\x8b":
        for k in (1, 4, 8):
            yield f"gzip trailer cut by {k}", data[:-k]
    for v in range(VARIANTS):
        b = bytearray(data)
        for _ in range(1 + v):
            i = rng.randrange(n) if n else 0
            if n:
                b[i] = rng.randrange(256)
        yield f"bytes changed ({v + 1})", bytes(b)


def run(args, what, ok_codes=(0, 2, 3)):
    env = dict(os.environ, NDF_DEVICE="cpu", ASAN_OPTIONS=SAN,
               UBSAN_OPTIONS="halt_on_error=1:exitcode=86:print_stacktrace=1",
               NDF_READ_LIMIT="256M")
    try:
        p = subprocess.run([NDFILT, *args], capture_output=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        FAIL.append(f"{what}: ndfilt {' '.join(args)}: hung (60 s)")
        return
    err = p.stderr.decode("utf-8", "backslashreplace")
    bad = p.returncode not in ok_codes or "Sanitizer" in err or "runtime error" in err
    if bad:
        FAIL.append(f"{what}: ndfilt {' '.join(args)}: exit {p.returncode}\n{err[-3000:]}")
    # messages quote what a file holds only as printable text (UTF-8, no control characters)
    try:
        text = p.stderr.decode("utf-8")
    except UnicodeDecodeError:
        text = "\x00"
    if any(ord(c) < 0x20 and c not in "\t\n\r" or ord(c) == 0x7f for c in text):
        FAIL.append(f"{what}: ndfilt {' '.join(args)}: raw bytes in the message: {err[-300:]!r}")


def main():
    rng = random.Random(int(os.environ.get("NDF_TEST_SEED", "1")))
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in sorted(os.listdir(ROOT)):
            for name in sorted(os.listdir(os.path.join(ROOT, fmt))):
                data = open(os.path.join(ROOT, fmt, name), "rb").read()
                ext = next((e for e in (".nii.gz", ".fits.gz", ".fits.fz") if name.endswith(e)),
                           os.path.splitext(name)[1])
                for what, blob in variants(data, rng):
                    path = os.path.join(tmp, "f" + ext)
                    with open(path, "wb") as f:
                        f.write(blob)
                    tag = f"{fmt}/{name} ({what})"
                    if fmt == "kernel":
                        img = os.path.join(tmp, "img.npy")
                        if not os.path.exists(img):  # ones, (4, 5, 3, 2) float32, as numpy saves
                            h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (4, 5, 3, 2), }"
                            h += b" " * (63 - (10 + len(h)) % 64) + b"\n"
                            with open(img, "wb") as f:
                                f.write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h +
                                        b"\x00\x00\x80\x3f" * 120)
                        run(["conv", img, os.path.join(tmp, "o.npy"), "--kernel", path], tag)
                    else:
                        run(["info", path], tag)
                        out = os.path.join(tmp, "o" + (ext if fmt != "fits" else ".fits"))
                        run(["gauss", path, out, "--sigma", "1"], tag)
                    count += 1
        left = [f for f in os.listdir(tmp) if ".tmp" in f]
        if left:
            FAIL.append(f"temporary files left: {left}")
    for f in FAIL:
        print("FAIL", f)
    print(f"cli corpus: {count} files and variants, {len(FAIL)} failures")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
