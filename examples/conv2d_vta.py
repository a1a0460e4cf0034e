"""A ResNet-style int8 conv2d on VTA through vta.compiler.topi, with and without virtual threads.

    .venv/bin/python examples/conv2d_vta.py [--preset small] [--channels 32] [--size 14]

Packs NCHW/OIHW tensors into VTA's blocked layouts, compiles conv2d + bias + shift + relu +
clip with the default knobs, runs it on the functional simulator (race-checked), compares with a
plain numpy convolution, and prints the performance model's cycle estimate for both schedules.
"""

from __future__ import annotations

import argparse

import numpy as np
from vta.compiler import topi
from vta.isa import Config


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, shift: int) -> np.ndarray:
    """Plain NCHW int conv2d (3x3, pad 1) + bias, >> shift, relu, clip to int8."""
    n, c, h, wd = x.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((n, w.shape[0], h, wd), np.int64)
    for dy in range(3):
        for dx in range(3):
            acc += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + h, dx:dx + wd], w[:, :, dy, dx])
    acc = (acc + b[None, :, None, None]).astype(np.int32)
    return np.clip(np.maximum(acc >> shift, 0), 0, 127).astype(np.int8)


def run(cfg: Config, channels: int, size: int) -> bool:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, channels, size, size), dtype=np.int8)
    w = rng.integers(-128, 128, (channels, channels, 3, 3), dtype=np.int8)
    b = rng.integers(-5000, 5000, channels).astype(np.int32)
    xp, wp, bp = topi.pack_nchw(x, cfg), topi.pack_oihw(w, cfg), topi.pack_bias(b, cfg)
    ref = reference(x, w, b, 8)
    ok = True
    for vt in (False, True):
        knobs = topi.conv2d_knobs(xp.shape, wp.shape, (1, 1), (1, 1), cfg, virtual_threads=vt)
        op = topi.conv2d_packed(xp.shape, wp.shape, padding=(1, 1), bias=True, shift=8,
                                relu=True, clip=(0, 127), knobs=knobs, config=cfg)
        out = topi.unpack_nchw(op.check_races(xp, wp, bp), 1, channels)
        same = bool(np.array_equal(out, ref))
        ok = ok and same
        perf = topi.conv2d_packed(xp.shape, wp.shape, padding=(1, 1), bias=True, shift=8,
                                  relu=True, clip=(0, 127), knobs=knobs, config=cfg,
                                  target="perf")
        stats = perf.module(xp, wp, bp, np.zeros(perf.out_shape, np.int8))
        print(f"virtual threads {'on ' if vt else 'off'}: {'OK' if same else 'MISMATCH'}, "
              f"knobs {knobs}, ~{stats.cycles} cycles (perf model)")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default=None)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--size", type=int, default=14)
    args = ap.parse_args(argv)
    cfg = Config.preset(args.preset) if args.preset else Config()
    return 0 if run(cfg, args.channels, args.size) else 1


if __name__ == "__main__":
    raise SystemExit(main())
