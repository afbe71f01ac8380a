# sass_mix.py - warp instructions executed by opcode, and by 100-instruction window of the
# kernel, from Nsight Compute's source counters (ncu --page source --csv, as
# ../iir-mem-ablation-2026-11-23-h200/ncu_source_yxc8_512.csv.gz). Usage: python3 sass_mix.py CSV.gz
import collections, csv, gzip, re, sys
rows = list(csv.reader(l for l in gzip.open(sys.argv[1], 'rt') if l.startswith('"')))
rows = [r for r in rows if r and r[0] != 'Kernel Name']
h, rows = rows[0], rows[1:]
ie, src = h.index("Instructions Executed"), h.index("Source")
op = lambda r: re.sub(r'^@!?U?P\w+\s+', '', r[src].strip()).split()[0]
kind = lambda o: 'MOV' if o.startswith('IMAD.MOV') else o.split('.')[0]
n = [int(r[ie].replace(',', '') or 0) for r in rows]
tot = collections.Counter()
for r, k in zip(rows, n):
    tot[kind(op(r))] += k
print("warp instructions", sum(n))
for k, v in tot.most_common(12):
    print(f"  {k:8s} {v:12d} {100 * v / sum(n):5.1f} %")
print("windows of 100 SASS lines over 1 M warp instructions: total, MOV (incl. IMAD.MOV), HMMA, STS, LDS")
for s in range(0, len(rows), 100):
    c = collections.Counter()
    for r, k in zip(rows[s:s + 100], n[s:s + 100]):
        c[kind(op(r))] += k
    t = sum(c.values())
    if t >= 1e6:
        print(f"  {s:5d} {t / 1e6:6.2f} M  MOV {c['MOV'] / 1e6:5.2f}  HMMA {c['HMMA'] / 1e6:5.2f}  STS {c['STS'] / 1e6:5.2f}  LDS {c['LDS'] / 1e6:5.2f}")
