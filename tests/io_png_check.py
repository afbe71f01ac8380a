#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""io_png_check.py - src/io's PNG reader and writer against a PNG codec written apart here
(numpy, zlib, struct), through io_convert.

The encoder below writes random images of every colour type and bit depth (palettes, 1/2/4-bit
gray, transparency by tRNS, Adam7 interlacing, every row filter) with pHYs, oFFs, tEXt, zTXt,
iTXt, gAMA and sRGB chunks. io_convert turns each into .npy, compared with the expansion src/io promises
(palettes and tRNS to RGB(A), small depths scaled to 8 bits), and into .png, which the decoder
below must read back with the same samples and chunks. Files whose image data is cut short, has
more than the image or bytes after its end, or whose checksum or a chunk's CRC is wrong must be
refused. The real PNG files this machine has (scikit-image's data) go through the same, against
Pillow where it is installed. Exit 0 on pass,
1 on failure; 77 only if numpy is missing.

Environment: IO_CONVERT (the io_convert tool), NDF_TEST_SEED (repeat a run)."""
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import io_check_common as common  # noqa: E402
from io_check_common import convert, fail  # noqa: E402

(np,) = common.need("numpy")
Image = common.optional("PIL.Image")

SIG = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples a pixel
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]  # x0, y0, dx, dy

# ---- the codec ----

def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def pillow(path):
    with Image.open(path) as im:
        im.load()
        return im


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_rows(samples, depth):
    """(h, w, c) integer samples -> (h, rowbytes) bytes, big-endian, bits packed MSB first."""
    h, w, c = samples.shape
    flat = samples.reshape(h, w * c).astype(np.uint64)
    if depth == 16:
        return flat.astype(">u2").view(np.uint8).reshape(h, -1)
    if depth == 8:
        return flat.astype(np.uint8)
    per = 8 // depth
    n = -(-w * c // per)
    out = np.zeros((h, n * per), np.uint64)
    out[:, :w * c] = flat
    out = out.reshape(h, n, per)
    shifts = np.array([8 - depth * (i + 1) for i in range(per)], np.uint64)
    return (out << shifts).sum(axis=2).astype(np.uint8)


def unpack_rows(raw, w, c, depth):
    h = raw.shape[0]
    if depth == 16:
        return raw.reshape(h, -1).view(">u2")[:, :w * c].astype(np.uint16).reshape(h, w, c)
    if depth == 8:
        return raw[:, :w * c].reshape(h, w, c)
    bits = np.unpackbits(raw, axis=1).reshape(h, -1, depth)
    vals = np.zeros(bits.shape[:2], np.uint8)
    for i in range(depth):
        vals = (vals << 1) | bits[:, :, i]
    return vals[:, :w * c].reshape(h, w, c)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filter_rows(rows, bpp, rng):
    """Each row with a random filter type (0-4), as the encoder may choose."""
    out = bytearray()
    prev = np.zeros(rows.shape[1], np.int64)
    for row in rows.astype(np.int64):
        t = int(rng.integers(0, 5))
        left = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        if t == 0:
            f = row
        elif t == 1:
            f = row - left
        elif t == 2:
            f = row - prev
        elif t == 3:
            f = row - (left + prev) // 2
        else:
            f = row - np.array([paeth(a, b, c) for a, b, c in zip(left, prev, upleft)], np.int64)
        out.append(t)
        out += (f % 256).astype(np.uint8).tobytes()
        prev = row
    return bytes(out)


def unfilter_rows(data, h, rowbytes, bpp):
    rows = np.zeros((h, rowbytes), np.uint8)
    prev = [0] * rowbytes
    at = 0
    for y in range(h):
        t = data[at]
        f = data[at + 1:at + 1 + rowbytes]
        at += 1 + rowbytes
        cur = [0] * rowbytes
        for i in range(rowbytes):
            a = cur[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            pred = (0, a, b, (a + b) // 2, paeth(a, b, c))[t] if t <= 4 else None
            if pred is None:
                raise ValueError(f"bad filter type {t}")
            cur[i] = (f[i] + pred) & 255
        rows[y] = cur
        prev = cur
    return rows, at


def passes(w, h, interlace):
    if not interlace:
        return [(0, 0, 1, 1, w, h)]
    out = []
    for x0, y0, dx, dy in ADAM7:
        pw, ph = (w - x0 + dx - 1) // dx, (h - y0 + dy - 1) // dy
        if pw > 0 and ph > 0:
            out.append((x0, y0, dx, dy, pw, ph))
    return out


def encode(samples, depth, ctype, rng, interlace=False, extra=(), plte=None, trns=None):
    h, w, c = samples.shape
    bpp = max(1, c * depth // 8)
    raw = b""
    for x0, y0, dx, dy, pw, ph in passes(w, h, interlace):
        raw += filter_rows(pack_rows(samples[y0::dy, x0::dx], depth), bpp, rng)
    level = int(rng.integers(0, 10))
    out = SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace)))
    for kind, data in extra:
        out += chunk(kind, data)
    if plte is not None:
        out += chunk(b"PLTE", plte.astype(np.uint8).tobytes())
    if trns is not None:
        out += chunk(b"tRNS", trns)
    z = zlib.compress(raw, level)
    cut = int(rng.integers(1, len(z) + 1))  # image data over two IDAT chunks
    return out + chunk(b"IDAT", z[:cut]) + chunk(b"IDAT", z[cut:]) + chunk(b"IEND", b"")


def decode(blob):
    """(samples (h, w, c), depth, colour type, {chunk type: [data, ...]})."""
    if blob[:8] != SIG:
        raise ValueError("bad signature")
    at, chunks, idat = 8, {}, b""
    while at < len(blob):
        n, kind = struct.unpack(">I4s", blob[at:at + 8])
        data = blob[at + 8:at + 8 + n]
        if struct.unpack(">I", blob[at + 8 + n:at + 12 + n])[0] != zlib.crc32(kind + data):
            raise ValueError(f"{kind} CRC")
        at += 12 + n
        if kind == b"IDAT":
            idat += data
        else:
            chunks.setdefault(kind, []).append(data)
        if kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    c = CHANNELS[ctype]
    raw = zlib.decompress(idat)
    bpp = max(1, c * depth // 8)
    out = np.zeros((h, w, c), np.uint16 if depth == 16 else np.uint8)
    pos = 0
    for x0, y0, dx, dy, pw, ph in passes(w, h, interlace):
        rowbytes = (pw * c * depth + 7) // 8
        rows, used = unfilter_rows(raw[pos:], ph, rowbytes, bpp)
        pos += used
        out[y0::dy, x0::dx] = unpack_rows(rows, pw, c, depth)
    return out, depth, ctype, chunks


def expand(samples, depth, ctype, plte=None, trns=None):
    """What src/io makes of the samples: planar (c, h, w), or (h, w) for gray."""
    s = samples.astype(np.int64)
    top = 65535 if depth == 16 else 255
    if ctype == 3:
        idx = s[:, :, 0]
        rgb = plte[idx]
        if trns is None:
            out = rgb
        else:
            alpha = np.full(256, 255)
            alpha[:len(trns)] = list(trns)
            out = np.concatenate([rgb, alpha[idx][:, :, None]], axis=2)
        dt = np.uint8
    else:
        out = s * (255 // ((1 << depth) - 1)) if depth < 8 else s
        if trns is not None:
            key = struct.unpack(">HHH" if ctype == 2 else ">H", trns)
            hit = np.all(s == np.array(key), axis=2)
            out = np.concatenate([out, np.where(hit, 0, top)[:, :, None]], axis=2)
        dt = np.uint16 if depth == 16 else np.uint8
    out = np.moveaxis(out, 2, 0).astype(dt)
    return out[0] if out.shape[0] == 1 else out


# ---- the checks ----

def scan_chunks(blob):
    """A file's chunks by type, without decoding the image."""
    chunks, at = {}, 8
    while at + 8 <= len(blob):
        n, kind = struct.unpack(">I4s", blob[at:at + 8])
        chunks.setdefault(kind, []).append(blob[at + 8:at + 8 + n])
        at += 12 + n
    return chunks


def text_chunks(chunks):
    return [(k, d) for k in (b"tEXt", b"zTXt", b"iTXt") for d in chunks.get(k, [])]


def text_value(kind, data):
    """A text chunk's key and text, decompressed."""
    key, _, rest = data.partition(b"\0")
    if kind == b"tEXt":
        return key, rest, b""
    if kind == b"zTXt":
        return key, zlib.decompress(rest[1:]), b""
    flag, rest = rest[0], rest[2:]  # compression flag and method
    lang, _, rest = rest.partition(b"\0")
    tkey, _, text = rest.partition(b"\0")
    return key, zlib.decompress(text) if flag else text, lang + b"|" + tkey


def check(path, label, want, chunks_in):
    """path read by io_convert (.npy, --info) and copied (.png, decoded here)."""
    tmp = os.path.join(common.work, label)
    if convert(path, tmp + ".npy"):
        got = np.load(tmp + ".npy")
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            fail(f"{label}: .npy is {got.dtype} {got.shape}, expected {want.dtype} {want.shape}"
                 + (f"; {common.differences(got, want)}" if got.shape == want.shape else ""))
    inf = common.info(path, report=False)
    if inf:
        sp = [float(v) for v in inf["spacing"]]
        want_sp = [0.0, 0.0]
        for d in chunks_in.get(b"pHYs", []):
            x, y, unit = struct.unpack(">IIB", d)
            if unit == 1 and x and y:
                want_sp = [1000.0 / y, 1000.0 / x]
        if not np.allclose(sp[-2:], want_sp, rtol=1e-8):
            fail(f"{label}: spacing {sp}, expected {want_sp} from pHYs")
        ca = int(inf["channel_axis"][0])
        if ca != (0 if want.ndim == 3 else -1):
            fail(f"{label}: channel_axis {ca}")
    if not convert(path, tmp + "_back.png"):
        return
    blob = slurp(tmp + "_back.png")
    pillow_ok = Image is not None and (want.dtype == np.uint8 or want.ndim == 2)
    if pillow_ok:  # Pillow reads 8-bit images and 16-bit gray as they are
        im = np.asarray(pillow(tmp + "_back.png"))
        im = im if im.ndim == 2 else np.moveaxis(im, 2, 0)
        if not np.array_equal(im.astype(want.dtype), want):
            fail(f"{label}: Pillow reads the copy differently")
    chunks = scan_chunks(blob)
    if want.size <= 100000 or not pillow_ok:  # this decoder is slow: large ones to Pillow
        try:
            samples, _, _, chunks = decode(blob)
        except Exception as e:  # noqa: BLE001 - any decoding failure is a failed check
            fail(f"{label}: the copy does not decode: {e}")
            return
        back = np.moveaxis(samples, 2, 0)
        back = back[0] if back.shape[0] == 1 else back
        if back.dtype != want.dtype or not np.array_equal(back, want):
            fail(f"{label}: the copy holds {back.dtype} {back.shape}, expected {want.dtype} "
                 f"{want.shape}")
    _, _, depth, ctype = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
    if ctype != {1: 0, 2: 4, 3: 2, 4: 6}[1 if want.ndim == 2 else want.shape[0]] or (
            depth != 8 * want.itemsize):
        fail(f"{label}: the copy has colour type {ctype}, depth {depth}")
    for kind in (b"pHYs", b"oFFs", b"gAMA", b"sRGB", b"cHRM", b"iCCP"):
        if chunks.get(kind) != chunks_in.get(kind):
            fail(f"{label}: the copy's {kind} is {chunks.get(kind)}, the file's {chunks_in.get(kind)}")
    tin = sorted(text_value(k, d) + (k,) for k, d in text_chunks(chunks_in))
    tout = sorted(text_value(k, d) + (k,) for k, d in text_chunks(chunks))
    if tin != tout:
        fail(f"{label}: the copy's text is {tout}, the file's {tin}")


def synthetic(rng):
    kinds = [(0, d) for d in (1, 2, 4, 8, 16)] + [(2, 8), (2, 16), (3, 1), (3, 2), (3, 4), (3, 8),
                                                 (4, 8), (4, 16), (6, 8), (6, 16)]
    n = 0
    for ctype, depth in kinds:
        for variant in range(3):
            h, w = (int(v) for v in rng.integers(1, 24, 2))
            c = CHANNELS[ctype]
            top = (1 << depth) - 1
            plte = trns = None
            if ctype == 3:
                entries = int(rng.integers(1, top + 2))
                plte = rng.integers(0, 256, (entries, 3))
                samples = rng.integers(0, entries, (h, w, 1))
                if variant:
                    trns = rng.integers(0, 256, int(rng.integers(1, entries + 1))).astype(
                        np.uint8).tobytes()
            else:
                samples = rng.integers(0, top + 1, (h, w, c))
                if variant and ctype in (0, 2):
                    key = rng.integers(0, top + 1, c)
                    samples[rng.random((h, w)) < 0.3] = key  # some pixels take it
                    trns = struct.pack(">" + "H" * c, *key)
            extra = []
            if rng.integers(0, 2):
                extra.append((b"pHYs", struct.pack(">IIB", int(rng.integers(1, 10**5)),
                                                   int(rng.integers(1, 10**5)),
                                                   int(rng.integers(0, 2)))))
            if rng.integers(0, 2):
                extra.append((b"oFFs", struct.pack(">iiB", *(int(v) for v in rng.integers(
                    -10**6, 10**6, 2)), int(rng.integers(0, 2)))))
            extra.append((b"tEXt", b"Title\0random " + str(common.seed).encode()))
            if rng.integers(0, 2):
                extra.append((b"zTXt", b"Comment\0\0" + zlib.compress(b"zipped " * 20)))
            if rng.integers(0, 2):
                extra.append((b"iTXt", b"Description\0\0\0de\0Beschreibung\0\xc2\xb5m"))
            if rng.integers(0, 2):
                extra.append((b"gAMA", struct.pack(">I", 45455)))
                extra.append((b"sRGB", b"\0"))
            interlace = bool(rng.integers(0, 2))
            blob = encode(samples.astype(np.uint64), depth, ctype, rng, interlace, extra, plte, trns)
            label = f"c{ctype}_d{depth}_v{variant}{'_i' if interlace else ''}"
            path = os.path.join(common.work, label + ".png")
            with open(path, "wb") as f:
                f.write(blob)
            dec, *_ = decode(blob)  # the codec agrees with itself
            if not np.array_equal(dec, samples):
                fail(f"{label}: the check's own codec is wrong")
            if Image is not None and ctype in (0, 2, 6) and depth == 8 and trns is None:
                im = np.asarray(pillow(path))
                if not np.array_equal(im.reshape(samples.shape), samples):
                    fail(f"{label}: Pillow reads the check's file differently")
            want = expand(samples, depth, ctype, plte, trns)
            chunks_in = {}
            for k, d in extra:
                chunks_in.setdefault(k, []).append(d)
            check(path, label, want, chunks_in)
            n += 1
    return n


def corrupt(rng):
    """Image data cut short (in its checksum, or in its deflate data), with two rows too many,
    with bytes after the stream, with its checksum wrong, and a tEXt chunk whose CRC is wrong,
    each in a file otherwise whole: io_convert must refuse each (exit 3), writing nothing."""
    h, w = (int(v) for v in rng.integers(8, 24, 2))
    rows = [bytes([0]) + rng.integers(0, 256, w, dtype=np.uint8).tobytes() for _ in range(h + 2)]
    raw = b"".join(rows[:h])
    z = zlib.compress(raw, 9)
    head = SIG + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
    bad_text = chunk(b"tEXt", b"Title\0t")
    bad_text = bad_text[:-1] + bytes([bad_text[-1] ^ 1])
    cases = {"whole": (b"", z), "cut_checksum": (b"", z[:-2]), "cut_data": (b"", z[:-6]),
             "cut_half": (b"", z[:len(z) // 2]), "long": (b"", zlib.compress(b"".join(rows))),
             "junk": (b"", z + b"junk"), "checksum": (b"", z[:-1] + bytes([z[-1] ^ 1])),
             "text_crc": (bad_text, z)}
    for name, (pre, data) in cases.items():
        path = os.path.join(common.work, f"corrupt_{name}.png")
        with open(path, "wb") as f:
            f.write(head + pre + chunk(b"IDAT", data) + chunk(b"IEND", b""))
        out = os.path.join(common.work, f"corrupt_{name}.npy")
        r = common.run(path, out)
        if name == "whole":
            if r.returncode != 0:
                fail(f"corrupt_whole: io_convert: {r.stderr.strip()}")
        elif r.returncode != 3 or os.path.exists(out) or path not in r.stderr:
            fail(f"corrupt_{name}: io_convert exit {r.returncode} ({r.stderr.strip()}), "
                 f"expected 3 with a message naming the file")
    return len(cases) - 1


def cross_format(rng):
    """.npy (no metadata) to PNG: 2-D u8 and u16; other dtypes refused, nothing written."""
    for dt in (np.uint8, np.uint16):
        shape = tuple(int(v) for v in rng.integers(1, 30, 2))
        a = rng.integers(0, np.iinfo(dt).max + 1, shape).astype(dt)
        x = os.path.join(common.work, f"x_{a.dtype}")
        src, dst = x + ".npy", x + ".png"
        np.save(src, a)
        if convert(src, dst):
            samples, depth, ctype, _ = decode(slurp(dst))
            if ctype != 0 or depth != 8 * a.itemsize or not np.array_equal(samples[:, :, 0], a):
                fail(f".npy {a.dtype} to .png: decoded depth {depth} type {ctype} differs")
    src, dst = os.path.join(common.work, "f.npy"), os.path.join(common.work, "f.png")
    np.save(src, rng.random((4, 5)).astype(np.float32))
    r = common.run(src, dst)
    if r.returncode == 0 or "--dtype u8 or u16" not in r.stderr or os.path.exists(dst):
        fail(f"float32 .npy to .png: exit {r.returncode}, '{r.stderr.strip()}', "
             f"output {'left' if os.path.exists(dst) else 'absent'}")


def pillow_expected(path):
    """What src/io should make of a file, from Pillow's decoding (a decoder apart from libpng)."""
    im = pillow(path)
    mode = im.mode
    if mode == "P":
        im = im.convert("RGBA" if "transparency" in im.info else "RGB")
    elif mode in ("L", "RGB") and "transparency" in im.info:
        im = im.convert("LA" if mode == "L" else "RGBA")
    a = np.asarray(im)
    if mode == "1":
        a = a.astype(np.uint8) * 255
    elif a.dtype != np.uint8:
        a = a.astype(np.uint16)
    return a if a.ndim == 2 else np.moveaxis(a, 2, 0)


def real_files():
    found = common.globbed(("/usr/lib/python3/dist-packages/skimage/data/*.png", None),
                           ("/usr/lib/python3/dist-packages/skimage/**/tests/data/*.png", 2))
    n = 0
    for path in found:
        blob = slurp(path)
        chunks = scan_chunks(blob)
        _, _, depth, ctype = struct.unpack(">IIBB", chunks[b"IHDR"][0][:10])
        if Image is not None and (depth < 16 or ctype == 0):  # Pillow makes 16-bit colour 8-bit
            want = pillow_expected(path)
        else:
            samples, depth, ctype, _ = decode(blob)
            plte = chunks.get(b"PLTE")
            plte = np.frombuffer(plte[0], np.uint8).reshape(-1, 3).astype(np.int64) if plte else None
            want = expand(samples, depth, ctype, plte, chunks.get(b"tRNS", [None])[0])
        check(path, "real_" + os.path.basename(path).replace(".", "_"), want, chunks)
        n += 1
        print(f"real file {path}: {want.dtype} {want.shape}")
    return n


def main(rng):
    n = synthetic(rng)
    k = corrupt(rng)
    cross_format(rng)
    m = real_files()
    if m == 0:
        print("note: no real PNG files found on this machine")
    return (f"{n} PNG files written here, {k} corrupt ones, {m} real files"
            f"{'' if Image else ' (no Pillow: checked with this decoder only)'}: "
            f"{len(common.failures)} failures")


if __name__ == "__main__":
    common.main("ndf_png_check_", main)
