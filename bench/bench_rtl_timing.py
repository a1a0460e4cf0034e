"""Timing properties of the RTL core, measured from its own cycle and event counters.

Runs small programs on the Amaranth simulation of the whole core (``vta.hw.simulate``, AXI
memory model with an 8-cycle first-beat latency and one bus word per cycle) and prints:

1. GEMM: compute-busy cycles of a GEMM of N micro-op iterations against N (the reference is
   one micro-op per cycle): slope and constant of ``busy = slope * N + constant``.
2. Loads: cycles per bus word of long LOAD WGT / LOAD INP rows in steady state (reference: one
   bus word per cycle, i.e. ``bus_bytes`` bytes per cycle).
3. Tokens: a chain of no-op instructions alternating between load and compute through the
   dependency-token queues, against the same instructions with no tokens; the extra cycles per
   hop are the token latency (reference: at most 2 cycles).

Usage: ``.venv/bin/python bench/bench_rtl_timing.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from record import write_record
from vta.hw.simulate import run_program
from vta.isa import Config
from vta.isa.insn import FinishInsn, GemmInsn, Insn, MemInsn, Uop, encode_uops
from vta.isa.layout import MemType, Opcode


def counters(program: list[Insn], dram: np.ndarray, cfg: Config, bus_width: int) -> dict:
    """The core's counter registers after the run (register name -> value)."""
    return dict(run_program(program, dram, cfg.with_bus_width(bus_width)).stats.hw_counters)


def fit(xs: list[int], ys: list[int]) -> tuple[float, float]:
    slope, const = np.polyfit(np.array(xs, float), np.array(ys, float), 1)
    return float(slope), float(const)


# ---------------------------------------------------------------------------- GEMM
def gemm_program(cfg: Config, n_iter: int) -> tuple[list[Insn], np.ndarray]:
    """LOAD UOP (16 micro-ops), then one GEMM of ``n_iter`` micro-op iterations (or none)."""
    uops = [Uop(k % cfg.acc_depth, k % cfg.inp_depth, k % cfg.wgt_depth) for k in range(16)]
    dram = np.zeros(4096, np.uint8)
    ub = np.frombuffer(encode_uops(uops, cfg), np.uint8)
    dram[:len(ub)] = ub
    prog: list[Insn] = [MemInsn(opcode=Opcode.LOAD, memory_type=MemType.UOP, sram_base=0,
                                dram_base=0, y_size=1, x_size=16, x_stride=16)]
    if n_iter:
        prog.append(GemmInsn(uop_bgn=0, uop_end=16, iter_out=max(1, n_iter // 16 // 4),
                             iter_in=min(4, n_iter // 16), dst_factor_in=0, dst_factor_out=0))
    prog.append(FinishInsn())
    return prog, dram


def bench_gemm(cfg: Config, sizes: list[int]) -> dict:
    base = counters(*gemm_program(cfg, 0), cfg, 64)["compute_busy"]
    ns, busy = [], []
    for n in sizes:
        prog, dram = gemm_program(cfg, n)
        g = prog[1]
        iters = g.iter_out * g.iter_in * (g.uop_end - g.uop_bgn)
        hw = counters(prog, dram, cfg, 64)
        assert hw["gemm_uops"] == iters, (hw["gemm_uops"], iters)
        ns.append(iters)
        busy.append(hw["compute_busy"] - base)
        print(f"  GEMM of {iters:5d} micro-op iterations: {busy[-1]:5d} compute cycles "
              f"(N + {busy[-1] - iters})")
    slope, const = fit(ns, busy)
    print(f"  => {slope:.3f} cycles per micro-op (reference 1.000), constant {const:.1f} cycles")
    return {"cycles_per_uop": slope, "constant": const}


# ---------------------------------------------------------------------------- loads
def load_program(cfg: Config, mem_type: MemType, elems: int) -> tuple[list[Insn], np.ndarray]:
    eb = cfg.elem_bytes(mem_type)
    dram = np.arange(elems * eb + 4096, dtype=np.uint32).astype(np.uint8)
    prog: list[Insn] = [
        MemInsn(opcode=Opcode.LOAD, memory_type=mem_type, sram_base=0, dram_base=0, y_size=1,
                x_size=elems, x_stride=elems, push_next_dep=1),
        GemmInsn(pop_prev_dep=1, iter_out=0, iter_in=0, uop_bgn=0, uop_end=1),
        FinishInsn()]
    return prog, dram


def bench_load(cfg: Config, bus_width: int, mem_type: MemType, sizes: list[int]) -> dict:
    bus_bytes = bus_width // 8
    eb = cfg.elem_bytes(mem_type)
    words, busy = [], []
    for n in sizes:
        hw = counters(*load_program(cfg, mem_type, n), cfg, bus_width)
        words.append(n * eb // bus_bytes)
        busy.append(hw["load_busy"])
    slope, const = fit(words, busy)
    print(f"  LOAD {mem_type.name} ({eb} B elements), {bus_width}-bit bus: "
          + ", ".join(f"{w} words in {b} cycles" for w, b in zip(words, busy)))
    print(f"  => steady state {slope:.3f} cycles per bus word = {bus_bytes / slope:.2f} B/cycle "
          f"(reference 1.000 cycle per word = {bus_bytes} B/cycle; ratio {1 / slope:.3f}); "
          f"fixed {const:.1f} cycles (memory latency 8 + pipeline)")
    return {"cycles_per_word": slope, "constant": const}


def store_program(cfg: Config, elems: int) -> tuple[list[Insn], np.ndarray]:
    dram = np.zeros(elems * cfg.out_elem_bytes + 64, np.uint8)
    prog: list[Insn] = [
        GemmInsn(iter_out=0, iter_in=0, uop_bgn=0, uop_end=1, push_next_dep=1),
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, sram_base=0, dram_base=0,
                y_size=1, x_size=elems, x_stride=elems, pop_prev_dep=1, push_prev_dep=1),
        FinishInsn(pop_next_dep=1)]
    return prog, dram


def bench_store(cfg: Config, bus_width: int, sizes: list[int]) -> dict:
    bus_bytes = bus_width // 8
    words, busy = [], []
    for n in sizes:
        hw = counters(*store_program(cfg, n), cfg, bus_width)
        words.append(max(1, n * cfg.out_elem_bytes // bus_bytes))
        busy.append(hw["store_busy"])
    slope, const = fit(words, busy)
    print(f"  STORE ({cfg.out_elem_bytes} B elements), {bus_width}-bit bus: "
          + ", ".join(f"{w} words in {b} cycles" for w, b in zip(words, busy)))
    print(f"  => steady state {slope:.3f} cycles per bus word (reference 1.000); fixed "
          f"{const:.1f} cycles")
    return {"cycles_per_word": slope, "constant": const}


# ---------------------------------------------------------------------------- tokens
def token_program(hops: int, with_tokens: bool) -> list[Insn]:
    """``hops`` no-op instructions alternating load, compute, load, ... chained by tokens."""
    prog: list[Insn] = []
    for k in range(hops):
        first, last = k == 0, k == hops - 1
        t = int(with_tokens)
        if k % 2 == 0:  # load: pops compute->load (except first), pushes load->compute
            prog.append(MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, x_size=0,
                                pop_next_dep=t * int(not first), push_next_dep=t * int(not last)))
        else:  # compute: pops load->compute, pushes compute->load (except last)
            prog.append(GemmInsn(iter_out=0, iter_in=0, uop_bgn=0, uop_end=1, pop_prev_dep=t,
                                 push_prev_dep=t * int(not last)))
    prog.append(FinishInsn(pop_prev_dep=int(with_tokens and hops % 2 == 1)))
    return prog


def bench_tokens(cfg: Config, hops: list[int]) -> dict:
    dram = np.zeros(64, np.uint8)
    chained, free, busy = [], [], []
    for h in hops:
        hw = counters(token_program(h, True), dram, cfg, 64)
        chained.append(hw["cycles"])
        busy.append(hw["load_busy"] + hw["compute_busy"] - hw["load_token_wait"]
                    - hw["compute_token_wait"])
        free.append(counters(token_program(h, False), dram, cfg, 64)["cycles"])
    per_hop, _ = fit(hops, chained)
    busy_per_insn, _ = fit(hops, busy)  # pop + run + push of one no-op, waits excluded
    print("  " + ", ".join(f"{h} hops: {c} cycles chained by tokens, {f} without tokens"
                           for h, c, f in zip(hops, chained, free)))
    extra = per_hop - busy_per_insn
    # the dependent module pops in the cycle after the push when nothing else delays it; every
    # cycle of a hop beyond the instruction's own busy cycles is added token latency
    print(f"  => {per_hop:.2f} cycles per hop = {busy_per_insn:.2f} busy cycles of the no-op "
          f"instruction (pop, run, push) + {extra:.2f}; a token pushed in cycle t is popped in "
          f"cycle t+{1 + extra:.0f}: latency {1 + extra:.2f} cycles (reference: at most 2)")
    return {"cycles_per_hop": per_hop, "token_latency": 1 + extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer and smaller programs")
    args = ap.parse_args()
    t0 = time.time()
    small, default = Config.preset("small"), Config()
    print("1. GEMM: one micro-op per cycle (small config, 1x4x4)")
    fig = {"gemm": bench_gemm(small, [16, 64, 256] if args.quick else [16, 64, 256, 1024])}
    print("2. Loads: bus words per cycle (default config, 1x16x16)")
    sizes = [2, 6] if args.quick else [2, 8, 16]
    for bw in (64, 128):
        fig[f"load_wgt_{bw}bit"] = bench_load(default, bw, MemType.WGT, sizes)
    fig["load_inp_64bit"] = bench_load(default, 64, MemType.INP,
                                       [8, 32] if args.quick else [16, 64, 128])
    print("   Stores, for comparison (default config)")
    for bw in (64, 128):
        fig[f"store_{bw}bit"] = bench_store(default, bw, [8, 32] if args.quick else [16, 64, 128])
    print("3. Dependency tokens (small config)")
    fig["tokens"] = bench_tokens(small, [8, 32] if args.quick else [8, 32, 64])
    print(f"({time.time() - t0:.0f} s)")
    write_record("bench_rtl_timing", fig,
                 {"cycles_per_uop": 1.0, "cycles_per_word": 1.0, "token_latency_max": 2},
                 params=vars(args))


if __name__ == "__main__":
    main()
