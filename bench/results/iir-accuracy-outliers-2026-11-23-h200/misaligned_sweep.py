import os, itertools, numpy as np, cupy as cp, ndfilt
tag = os.environ.get('TAG', '')
shape = (5, 64, 128); n = int(np.prod(shape))
rng = np.random.default_rng(1)
sig = [0.5, 1.5, 4, 10, 25, 60, 120, 200]
worst = {}
for off, inplace in [(0, 0), (2, 1), (1, 0), (2, 0)]:
    w = (0, None)
    for s in itertools.product(sig, repeat=3):
        h = rng.uniform(-1, 1, n + off).astype(np.float32)
        ndfilt.set_device('cpu')
        ref = ndfilt.gaussian_filter(h[off:].reshape(shape).astype(np.float64), s, mode='nearest', method='iir_deriche')
        ndfilt.set_device('auto')
        b = cp.asarray(h); x = b[off:].reshape(shape)
        if inplace:
            ndfilt.gaussian_filter(x, s, mode='nearest', method='cuda_iir', output=x); y = x
        else:
            o = cp.full(n + off, cp.nan, cp.float32); y = o[off:].reshape(shape)
            ndfilt.gaussian_filter(x, s, mode='nearest', method='cuda_iir', output=y)
        e = float(np.abs(cp.asnumpy(y) - ref).max() / np.abs(ref).max())
        if e > w[0]: w = (e, s)
    print(tag, 'off', off, 'inplace', inplace, 'worst %.3g at sigma %s' % w, flush=True)
