"""``build(schedule, args, target=...)``: lower, run the passes, generate code, return a callable.

>>> m = build(s, [A, B, C], target="fsim", config=cfg)        # doctest: +SKIP
>>> m(a, b, c)          # numpy arrays; outputs are written in place    # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from vta import runtime as rt
from vta.isa import Config, MemType
from vta.isa.gcpause import paused_gc
from vta.isa.stats import RunStats
from vta.runtime import backends
from vta.runtime.arena import Arena
from vta.runtime.queue import CommandQueue
from vta.sim.fsim import check_races

from .codegen.vta import emit
from .errors import CodegenError
from .lower import lower
from .passes.alu import InjectAlu
from .passes.base import Pipeline
from .passes.dma import InjectDma
from .passes.vta import (
    AllocateScratchpad,
    CheckVtaLowered,
    FoldUopLoops,
    InjectVirtualThreads,
)
from .schedule import Schedule
from .te.tensor import PlaceholderOp, Tensor
from .tir.stmt import Buffer, PrimFunc

#: The VTA targets: the runtime's devices (simulators, the performance model and the boards).
VTA_TARGETS = backends.devices()

#: Devices shared by the compiled modules of one process, per (target, configuration).
_SHARED_DEVICES: dict[tuple[str, Config], Any] = {}
#: Every target: the VTA ones and the CPU (LLVM JIT) under its names.
TARGETS = VTA_TARGETS + backends.names("cpu", aliases=True)


def vta_pipeline(cfg: Config, *, verify_each: bool = True, dump: Any = None) -> Pipeline:
    """The VTA pass list, in order."""
    return Pipeline((InjectDma(cfg), InjectAlu(cfg), FoldUopLoops(), InjectVirtualThreads(),
                     CheckVtaLowered(), AllocateScratchpad(cfg)), verify_each, dump)


def lower_vta(sch: Schedule, args: Sequence[Tensor], cfg: Config, name: str = "main", *,
              init_in_first_iteration: bool = False, **kw: Any) -> PrimFunc:
    """Lower and run the VTA passes (the IR the VTA code generator executes)."""
    with paused_gc():
        func = lower(sch, args, name, init_in_first_iteration=init_in_first_iteration)
        return vta_pipeline(cfg, **kw)(func)


class VtaModule:
    """A compiled VTA operator: call it on numpy arrays (outputs are written in place)."""

    def __init__(self, func: PrimFunc, cfg: Config, args: Sequence[Tensor], target: str,
                 device: Any = None):
        self.func, self.cfg, self.args, self.target = func, cfg, list(args), target
        self._device = device
        self.outputs = [k for k, a in enumerate(args) if not isinstance(a.op, PlaceholderOp)]
        self.last_stats: RunStats | None = None
        self.last_commands: list = []

    @property
    def ir(self) -> str:
        return str(self.func)

    def dump_commands(self, limit: int | None = None) -> str:
        """The last run's command stream with its dependency tokens, one command per line."""
        lines = []
        for n, c in enumerate(self.last_commands[:limit]):
            pops = "".join(f" pop<-{p}" for p in c.pops)
            pushes = "".join(f" push->{p}" for p in c.pushes)
            tag = c.thread if isinstance(c.thread, tuple) else (c.thread,)
            th = "" if c.thread is None else " t" + ".".join(str(t) for t in tag)
            lines.append(f"{n:5} {c.module:7} {c.what}{th}{pops}{pushes}")
        return "\n".join(lines) + "\n"

    def device(self) -> Any:
        """The device this module runs on: given at build time, else one shared per
        (target, configuration) and grown when an operator needs a larger arena."""
        if self._device is not None:
            return self._device

        need = max(1 << 20, _round(2 * sum(_nbytes(p) + 64 for p in self.func.params)
                                   + (1 << 20)))
        key = (self.target, self.cfg)
        dev = _SHARED_DEVICES.get(key)
        if dev is None or dev.arena.size < need:
            dev = rt.open(self.target, self.cfg, arena_size=max(
                need, dev.arena.size * 2 if dev is not None else need))
            _SHARED_DEVICES[key] = dev
        return dev

    def _check(self, arrays: Sequence[np.ndarray]) -> None:
        if len(arrays) != len(self.func.params):
            raise CodegenError(f"{self.func.name} takes {len(self.func.params)} arrays "
                               f"({', '.join(p.name for p in self.func.params)}), got "
                               f"{len(arrays)}")
        for a, p in zip(arrays, self.func.params):
            if tuple(a.shape) != p.shape or a.dtype != np.dtype(p.dtype):
                raise CodegenError(f"argument {p.name}: expected {p.dtype}{list(p.shape)}, got "
                                   f"{a.dtype}{list(a.shape)}")

    def _place(self, dev: Any, arrays: Sequence[np.ndarray]) -> dict[Buffer, Any]:
        bufs = {}
        for a, p in zip(arrays, self.func.params):
            bufs[p] = dev.array(np.ascontiguousarray(a), mem_type=_mem_type(p, self.cfg))
        return bufs

    def __call__(self, *arrays: np.ndarray) -> RunStats | None:
        """Run on the device; returns the device statistics (None: nothing ran)."""
        self._check(arrays)
        dev = self.device()
        bufs = self._place(dev, arrays)
        try:
            q = dev.command_queue(max_insns=1 << 26)  # one program: whole-operator stats
            self.last_commands = emit(self.func, self.cfg, q, bufs)
            stats = q.synchronize()
            for k in self.outputs:
                p = self.func.params[k]
                arrays[k][...] = bufs[p].numpy(np.dtype(p.dtype), p.shape)
        finally:
            for b in bufs.values():
                b.free()
        self.last_stats = stats
        return stats

    def record(self, *arrays: np.ndarray) -> tuple[Any, np.ndarray, dict[Buffer, Any]]:
        """Record the program (with the inputs placed in a fresh fsim device's arena).

        Returns (RecordedProgram, device, buffers) so a caller can relocate and inspect it.
        """
        self._check(arrays)
        need = sum(_nbytes(p) + 64 for p in self.func.params)
        dev = rt.open("fsim", self.cfg, arena_size=_round(2 * need + (1 << 20)))
        bufs = self._place(dev, arrays)
        q = dev.command_queue(record=True, max_insns=1 << 30)
        emit(self.func, self.cfg, q, bufs)
        return q.record(), dev, bufs

    def check_races(self, *arrays: np.ndarray) -> np.ndarray:
        """Record, then run under every module order with vta.sim.fsim.check_races.

        Returns the outputs (list of arrays) of the race-checked run.
        """
        rec, dev, bufs = self.record(*arrays)
        dram = np.array(dev.dram, copy=True)
        uop_base = _round_up(dram.size, 4096)
        image = np.zeros(uop_base + len(rec.uops) + 64, dtype=np.uint8)
        image[:dram.size] = dram
        image[uop_base:uop_base + len(rec.uops)] = np.frombuffer(rec.uops, dtype=np.uint8)
        program = rec.relocate(dev.arena.base, uop_base)
        res = check_races(program, image, self.cfg)
        outs = []
        for k in self.outputs:
            p = self.func.params[k]
            b = bufs[p]
            raw = res.dram[b.addr:b.addr + _nbytes(p)]
            outs.append(raw.view(np.dtype(p.dtype)).reshape(p.shape).copy())
        return outs


def record_func(func: PrimFunc, cfg: Config, offsets: Sequence[int] | None = None,
                arena_size: int | None = None) -> Any:
    """Record the VTA program of a lowered function without a device (code generation in
    record mode): parameter ``k`` is the arena buffer at byte ``offsets[k]`` (default: one
    after another, 256-byte aligned). Returns the relocatable
    :class:`~vta.runtime.record.RecordedProgram` (data addresses relative to the arena,
    micro-ops in its own segment)."""
    sizes = [_nbytes(p) for p in func.params]
    if offsets is None:
        offsets, _ = placed_offsets(sizes, cfg)
    size = arena_size or max((o + n for o, n in zip(offsets, sizes)), default=256)
    # the recording moves no data: its arena's memory is one read-only zero byte repeated
    # (no allocation of the whole size per recorded candidate)
    arena = Arena(cfg, size, memory=np.broadcast_to(np.zeros(1, np.uint8), (size,)))
    bufs = {p: arena.alloc_at(o, n) for p, o, n in zip(func.params, offsets, sizes)}
    q = CommandQueue.recorder(cfg, arena, max_insns=1 << 30, kernels=_jit_table(cfg))
    with paused_gc():
        emit(func, cfg, q, bufs)
        return q.record()


#: Finalized micro-kernels by signature, per configuration, shared by every recording (the
#: default-knob search records hundreds of candidates whose kernels repeat); a table is
#: cleared when it reaches _MAX_JIT kernels.
_JIT: dict[Config, dict[Any, Any]] = {}
_MAX_JIT = 8192


def _jit_table(cfg: Config) -> dict[Any, Any]:
    t = _JIT.setdefault(cfg, {})
    if len(t) >= _MAX_JIT:
        t.clear()
    return t


def arena_align(cfg: Config) -> int:
    """The alignment of every tensor in DRAM: 256 bytes, or the largest element size of
    ``cfg`` when that is larger (a 32x32 weight tile is 1 KiB): LOAD/STORE address whole
    elements, so a tensor must start on a multiple of its element size."""
    return max(256, *(cfg.elem_bytes(t) for t in MemType))


def placed_offsets(sizes: Sequence[int], cfg: Config) -> tuple[list[int], int]:
    """Byte offsets of tensors of ``sizes`` placed one after another, each aligned by
    :func:`arena_align`, and the end of the last one (also aligned)."""
    a = arena_align(cfg)
    offsets, off = [], 0
    for n in sizes:
        offsets.append(off)
        off += _round_up(n, a)
    return offsets, off


def _nbytes(p: Buffer) -> int:
    return int(np.prod(p.shape)) * np.dtype(p.dtype).itemsize


def _round(n: int) -> int:
    return _round_up(n, 1 << 16)


def _round_up(n: int, k: int) -> int:
    return (n + k - 1) // k * k


def _mem_type(p: Buffer, cfg: Config) -> str | None:
    tile_bytes = int(np.prod(p.shape[-2:])) * np.dtype(p.dtype).itemsize if p.ndim >= 2 else 0
    for mt in ("acc", "inp", "wgt", "out"):
        if tile_bytes == cfg.elem_bytes({"inp": 2, "wgt": 1, "acc": 3, "out": 4}[mt]):
            return mt
    return None


def build(sch: Schedule, args: Sequence[Tensor], target: str = "fsim",
          config: Config | None = None, name: str = "main", **opts: Any) -> Any:
    """Compile a schedule into a callable on numpy arrays.

    ``target``: one of :data:`VTA_TARGETS` (the runtime's devices: "fsim", "rtl", "tsim",
    "perf", "pynq", "de10-nano", "ulx3s") or "virtual:BOARD" (VTA, through vta.runtime;
    ``config``, the VTA configuration, is required), or "cpu" (alias "llvm"; LLVM JIT, no
    configuration).
    """
    if target not in TARGETS and not target.startswith("virtual:"):
        raise CodegenError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)} "
                           f"or virtual:BOARD")
    cfg = config
    if target in backends.names("cpu", aliases=True):
        from .codegen.llvm import build_cpu  # deferred: llvmlite, only for host kernels

        return build_cpu(sch, args, name=name, **opts)
    if cfg is None:
        raise CodegenError(f"building for {target} needs the VTA configuration (config=)")
    func = lower_vta(sch, args, cfg, name, verify_each=opts.pop("verify_each", True),
                     init_in_first_iteration=opts.pop("init_in_first_iteration", False))
    return VtaModule(func, cfg, args, target, opts.pop("device", None))


__all__ = ["build", "lower_vta", "record_func", "vta_pipeline", "VtaModule", "TARGETS",
           "VTA_TARGETS"]
