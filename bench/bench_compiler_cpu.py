"""CPU (LLVM) kernels of vta.compiler.topi.cpu against numpy on the same machine.

Prints the best-of-N time of each kernel and of its numpy reference (element-wise and pooling:
plain numpy; dense and conv2d: numpy + BLAS via ``@``, conv2d as im2col + matmul), and the ratio
numpy_time / our_time (>= 1 means at least numpy's speed). Results are checked for agreement.

    .venv/bin/python bench/bench_compiler_cpu.py [--repeat 20] [--blas-threads N]

The LLVM kernels are single-threaded, so BLAS is limited to one thread by default
(--blas-threads changes it; it must be set before numpy loads BLAS).
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":
    _n = "1"
    if "--blas-threads" in sys.argv:
        _n = sys.argv[sys.argv.index("--blas-threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _n)

import time
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from vta.compiler.topi import cpu


def best(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def np_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    if kh == kw == 1:  # 1x1: no im2col needed
        sub = xp[:, :, ::stride, ::stride]
        cols = sub.transpose(0, 2, 3, 1).reshape(-1, c)
        out = cols @ w.reshape(o, c).T
        return out.reshape(n, sub.shape[2], sub.shape[3], o).transpose(0, 3, 1, 2)
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    oh, ow = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ w.reshape(o, -1).T
    return out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)


def np_maxpool(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    return sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s].max(axis=(-2, -1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--blas-threads", default="1", help="BLAS threads for numpy (default 1)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []

    def case(name: str, ours: Callable, ref: Callable, inputs: list, tol: float,
             kind: str) -> None:
        got, want = ours(*inputs), ref(*inputs)
        ok = np.allclose(got, want, rtol=tol, atol=tol)
        t_ours = best(lambda: ours(*inputs), args.repeat)
        t_ref = best(lambda: ref(*inputs), args.repeat)
        rows.append((name, kind, t_ours, t_ref, ok))
        print(f"{name:34} {t_ours * 1e3:9.3f} ms  numpy {t_ref * 1e3:9.3f} ms  "
              f"ratio {t_ref / t_ours:6.2f}  {'OK' if ok else 'MISMATCH'}  ({kind})", flush=True)

    print(f"{'kernel':34} {'ours':>12}  {'reference':>15}  numpy/ours")
    v = rng.standard_normal(1 << 22).astype(np.float32)
    w_ = rng.standard_normal(1 << 22).astype(np.float32)
    o = np.empty_like(v)
    add_op, relu_op = cpu.add(v.shape), cpu.relu(v.shape)
    case("add 4M float32 (into out)", lambda a, b: add_op(a, b, out=o),
         lambda a, b: np.add(a, b, out=o), [v, w_], 0, "element-wise")
    case("relu 4M float32 (into out)", lambda a: relu_op(a, out=o),
         lambda a: np.maximum(a, 0, out=o), [v], 0, "element-wise")
    case("add 4M float32 (new array)", add_op, np.add, [v, w_], 0, "element-wise")
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    case("max_pool2d 3x3/2 pad1 64x112x112", cpu.max_pool2d(x.shape, (3, 3), (2, 2), (1, 1)),
         lambda a: np_maxpool(a, 3, 2, 1), [x], 0, "pooling")
    case("avg_pool2d 2x2/2 64x112x112", cpu.avg_pool2d(x.shape, (2, 2), (2, 2)),
         lambda a: a.reshape(1, 64, 56, 2, 56, 2).mean(axis=(3, 5)), [x], 1e-5, "pooling")
    g = rng.standard_normal((1, 512, 7, 7)).astype(np.float32)
    case("global_avg_pool2d 512x7x7", cpu.global_avg_pool2d(g.shape),
         lambda a: a.mean(axis=(2, 3), keepdims=True), [g], 1e-5, "pooling")
    for batch in (1, 16):
        a = rng.standard_normal((batch, 512)).astype(np.float32)
        wt = rng.standard_normal((1000, 512)).astype(np.float32)
        case(f"dense {batch}x512 -> 1000", cpu.dense(batch, 512, 1000),
             lambda p, q: p @ q.T, [a, wt], 1e-3, "BLAS")
    for (c, h, o, k, s, p) in ((64, 56, 64, 3, 1, 1), (128, 28, 128, 3, 1, 1),
                               (64, 56, 128, 1, 2, 0)):
        xi = rng.standard_normal((1, c, h, h)).astype(np.float32)
        wk = rng.standard_normal((o, c, k, k)).astype(np.float32)
        case(f"conv2d {c}x{h}x{h} -> {o} k{k} s{s}",
             cpu.conv2d(xi.shape, wk.shape, (s, s), (p, p)),
             lambda a, b, s=s, p=p: np_conv(a, b, s, p), [xi, wk], 1e-2, "BLAS")
    sm = rng.standard_normal((64, 1000)).astype(np.float32)

    def np_softmax(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    case("softmax 64x1000", cpu.softmax(sm.shape), np_softmax, [sm], 1e-5, "other")
    print()
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}")
    for kind, goal in (("element-wise", 1.0), ("pooling", 1.0), ("BLAS", 0.5)):
        r = [t_ref / t for _, k, t, t_ref, _ in rows if k == kind]
        print(f"{kind:13} geometric-mean numpy/ours = {np.exp(np.mean(np.log(r))):.2f} "
              f"(goal >= {goal})")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
