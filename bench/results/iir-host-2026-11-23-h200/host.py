import time, ctypes as C, cupy as cp, ndfilt, sys
n0 = int(sys.argv[1])
x = cp.random.standard_normal((n0, n0, n0), dtype=cp.float32); y = cp.empty_like(x)
ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y)
plan = ndfilt._last_plan
s, d = ndfilt._cuda_operand(x, 'cupy'), ndfilt._cuda_operand(y, 'cupy')
lib = ndfilt.lib
bs, bd = C.byref(s.desc), C.byref(d.desc)
def rate(f, n=100):
    for _ in range(5): f()
    cp.cuda.Device().synchronize(); t = time.perf_counter()
    for _ in range(n): f()
    h = (time.perf_counter() - t) / n; cp.cuda.Device().synchronize(); return h * 1e6
ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
def one(f):
    ts = []
    for _ in range(30):
        cp.cuda.Device().synchronize(); ev0.record(); f(); ev1.record(); ev1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(ev0, ev1) * 1e3)
    ts.sort(); return ts[15]
for name, f in [("raw ndf_execute", lambda: lib.ndf_execute(plan, bs, bd)),
                ("python call", lambda: ndfilt.gaussian_filter(x, 4.5, mode='nearest', method='cuda_iir', output=y))]:
    print(f"{n0}^3 {name}: host {rate(f):.1f} us/call, one call {one(f):.1f} us (events)")
