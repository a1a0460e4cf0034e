"""The benchmark set of programs for the performance model: matmul tiles (single- and
double-buffered), random token-correct programs and compiler conv layers, each with its tsim
cycle count. Cached in the user cache directory (tsim runs take a while).

Used by bench/bench_perf_model.py (error table, calibration)."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import numpy as np
from vta.isa import Config
from vta.isa.fileio import user_cache_dir
from vta.isa.image import as_program_bytes


def _cache() -> Path:
    d = user_cache_dir("perf-samples")
    d.mkdir(parents=True, exist_ok=True)
    return d


def programs(cfg: Config, *, quick: bool = False):
    """(name, program bytes, dram) of the benchmark set."""
    from vta.sim.progen import random_program
    from vta.sim.programs import matmul_program

    shapes = [(16, 16, 16), (64, 64, 64), (128, 128, 128), (64, 256, 128), (256, 256, 256)]
    if quick:
        shapes = shapes[:3]
    for m, n, k in shapes:
        for db in (False, True):
            try:
                prog, dram, _ = matmul_program(cfg, m, n, k, double_buffer=db)
            except Exception as e:  # noqa: BLE001 - shape not expressible at this config
                print(f"skip matmul {m}x{n}x{k}: {e}")
                continue
            yield f"matmul {m}x{n}x{k}{' db' if db else ''}", prog, dram
    rng = np.random.default_rng(7)
    for i in range(4 if quick else 12):
        prog, dram = random_program(cfg, rng)
        yield f"random {i}", prog, dram
    yield from conv_programs(cfg, quick=quick)


def conv_programs(cfg: Config, *, quick: bool = False):
    """Recorded compiler conv2d programs (small ResNet-like layers)."""
    from vta.compiler.topi import conv2d_packed

    layers = [(14, 64, 64, 3, 1, 1), (14, 64, 128, 1, 2, 0), (7, 128, 128, 3, 1, 1),
              (28, 32, 64, 3, 2, 1)]
    if quick:
        layers = layers[:2]
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    for hw_, ci, co, k, s, p in layers:
        for threads in (True, False):
            from vta.compiler.topi import conv2d_knobs

            dshape = (1, ci // bi, hw_, hw_, b, bi)
            kshape = (co // bo, ci // bi, k, k, bo, bi)
            knobs = conv2d_knobs((1, ci // bi, hw_, hw_), kshape, (s, s), (p, p), cfg,
                                 virtual_threads=threads)
            op = conv2d_packed(dshape, kshape, strides=(s, s), padding=(p, p), shift=8,
                               clip=(0, 127), knobs=knobs, config=cfg, target="fsim")
            rng = np.random.default_rng(0)
            data = rng.integers(-8, 8, dshape, dtype=np.int8)
            kern = rng.integers(-8, 8, kshape, dtype=np.int8)
            rec, dev, bufs = op.module.record(data, kern, np.zeros(op.out_shape, np.int8))
            prog, dram = recorded_image(rec, dev)
            yield (f"conv {hw_}x{hw_} {ci}->{co} k{k} s{s}{' vt' if threads else ''}",
                   prog, dram)


def recorded_image(rec, dev):  # noqa: ANN001
    """A standalone (program, DRAM image) from a recorded program and its device: the arena
    as it was recorded, the micro-ops after it (as the compiler's race check lays it out)."""
    dram = np.array(dev.dram, copy=True)
    uop_base = -(-dram.size // 4096) * 4096
    image = np.zeros(uop_base + len(rec.uops) + 64, dtype=np.uint8)
    image[:dram.size] = dram
    image[uop_base:uop_base + len(rec.uops)] = np.frombuffer(rec.uops, dtype=np.uint8)
    return rec.relocate(dev.arena.base, uop_base), image


def tsim_cycles(name: str, prog: bytes, dram: np.ndarray, cfg: Config) -> int:
    from vta.hw import tsim

    # (the tsim build's key names the hardware: the same program takes other cycles on another
    # core)
    key = hashlib.sha1(prog + hashlib.sha1(dram.tobytes()).digest()
                       + json.dumps(cfg.params).encode()
                       + tsim.build(cfg).key.encode()).hexdigest()[:20]
    path = _cache() / f"{key}.json"
    if path.exists():
        return json.loads(path.read_text())["cycles"]
    r = tsim.run_program(prog, dram, cfg)
    path.write_text(json.dumps({"name": name, "cycles": r.stats.cycles}))
    return r.stats.cycles


def collect(cfg: Config, *, quick: bool = False):
    """[(name, program bytes, tsim cycles)] of the benchmark set."""
    out = []
    for name, prog, dram in programs(cfg, quick=quick):
        prog = as_program_bytes(prog, cfg)
        out.append((name, prog, tsim_cycles(name, prog, dram, cfg)))
        print(f"  {name:<40} {out[-1][2]:>10,} tsim cycles", flush=True)
    return out


if __name__ == "__main__":
    s = collect(Config())
    (_cache() / "default.pkl").write_bytes(pickle.dumps(s))
