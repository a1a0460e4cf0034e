"""Run a compiled module: VTA layers on a device (fsim, tsim, rtl, perf), the rest on the CPU.

The executor keeps activations as numpy arrays; a VTA layer packs its input into the arena at
the offset the memory plan gave it, runs its (relocated) instruction stream on the device and
unpacks the output. It lowers no VTA layer: every VTA program was compiled into the module. The
host kernels' IR is regenerated from the module's graph and JIT-compiled only when the module's
copy is that, byte for byte (:func:`vta.compiler.graph.host.module_host_kernels`).
CPU layers use the int8 reference kernels (bit-exact with VTA) and the
float kernels. ``target="cpu"`` runs every layer on the CPU.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from vta.isa import Config, MemInsn, decode_program, encode_program
from vta.isa.errors import VTAError
from vta.isa.records import JsonRecord
from vta.runtime import backends, opener

from ..ops import kernel_for
from ..topi.pack import unpack_activation
from .errors import InputError
from .host import module_host_kernels
from .lowering import layout4, matmul_inputs, matmul_output, packed_input
from .module import CompiledModule
from .reference import check_feeds

#: Where a module runs: the CPU, or VTA on a simulator or the performance model (the backend
#: registry's; a virtual board is "virtual:BOARD").
TARGETS = backends.module_targets()


class _Record(JsonRecord):
    error = InputError
    what = "run report"


@dataclass(frozen=True)
class LayerRecord(_Record):
    """One layer of a run: where it ran (the target or "cpu"), its MACs and wall time, and
    on VTA the cycles the target counted (None where it counts none) and the MACs the GEMM core
    executed (channel padding included)."""

    node: str
    op: str
    where: str
    macs: int
    seconds: float
    cycles: int | None = None
    gemm_macs: int | None = None

    def utilisation(self, cfg: Config) -> float | None:
        if self.where == "cpu" or not self.macs:
            return None
        if self.cycles:
            return self.macs / (self.cycles * cfg.macs_per_cycle)
        if self.gemm_macs:
            return self.macs / self.gemm_macs
        return None


@dataclass(frozen=True)
class RunReport(_Record):
    """What ``vta run --report`` prints (and ``--report-json`` writes): a record per layer
    and the run's wall time."""

    target: str
    layers: tuple[LayerRecord, ...] = ()
    seconds: float = 0.0

    def format(self, cfg: Config) -> str:
        cyc = any(r.cycles for r in self.layers)
        width = max([5] + [len(r.node) for r in self.layers])  # full names (--cpu-layer takes)
        head = f"{'layer':<{width}} {'op':<18} {'where':<6} {'MMACs':>9} {'ms':>9}"
        head += f" {'cycles':>11}" if cyc else ""
        head += f" {'util':>6}"
        lines = [head, "-" * len(head)]
        for r in self.layers:
            u = r.utilisation(cfg)
            line = (f"{r.node:<{width}} {r.op[:18]:<18} {r.where:<6} {r.macs / 1e6:>9.2f} "
                    f"{r.seconds * 1e3:>9.2f}")
            if cyc:
                line += f" {r.cycles:>11}" if r.cycles else f" {'-':>11}"
            line += f" {u * 100:>5.1f}%" if u is not None else f" {'-':>6}"
            lines.append(line)
        tot_macs = sum(r.macs for r in self.layers)
        vta = [r for r in self.layers if r.where != "cpu"]
        lines.append("-" * len(head))
        where = self.target if vta else "VTA"
        lines.append(f"total: {len(self.layers)} layers ({len(vta)} on {where}), "
                     f"{tot_macs / 1e9:.3f} GMACs "
                     f"({sum(r.macs for r in vta) / max(tot_macs, 1) * 100:.1f}% on VTA), "
                     f"{self.seconds * 1e3:.1f} ms wall"
                     + (f", {sum(r.cycles or 0 for r in vta)} VTA cycles" if cyc else ""))
        return "\n".join(lines)


def relocate(program: bytes, cfg: Config, base: int) -> bytes:
    """Add the arena base (bytes) to every LOAD/STORE dram_base (in elements of its type)."""
    if base == 0:
        return program
    out = []
    for i in decode_program(program, cfg):
        if isinstance(i, MemInsn):
            eb = cfg.elem_bytes(i.memory_type)
            i = replace(i, dram_base=i.dram_base + base // eb)
        out.append(i)
    return encode_program(out, cfg)


class Executor:
    """Runs one module on one target; the device (and arena) is opened once and reused."""

    def __init__(self, module: CompiledModule, target: str = "fsim", *,
                 progress: Callable[[int, int, str], None] | None = None,
                 arena_base: int = 0, host: str = "llvm") -> None:
        if target not in TARGETS and not target.startswith("virtual:"):
            raise InputError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)} "
                             f"or virtual:BOARD")
        self.m, self.target, self.progress = module, target, progress
        if host not in ("numpy", "llvm"):
            raise InputError(f"unknown host kernels {host!r}; use numpy or llvm")
        self.host = host
        self._host: dict[str, Any] = {}
        self.cfg = module.cfg
        self.dev = None
        self.buf = None
        self.programs: dict[str, bytes] = {}
        self.arena_base = arena_base
        #: The report of the last :meth:`run`.
        self.last_report = RunReport(target)
        if host == "llvm":  # JIT the module's host kernels now, not inside the first run

            m = module
            self._host = module_host_kernels(  # verified: regenerated from the graph first
                m.graph.nodes, m.shapes, m.graph.params, m.partition, m.host_ir)
            built: dict[str, Any] = {}  # identical kernels (same IR) are compiled once
            for hk in self._host.values():
                key = hk.ir + json.dumps(hk.opts, sort_keys=True)
                hk._module = built.setdefault(key, hk.module)
        if target != "cpu" and module.kernels:
            self._open()

    def _open(self) -> None:
        m = self.m
        align = m.plan.align
        try:
            opts = {"arena_base": self.arena_base} if self.arena_base else {}
            self.dev = opener.open(self.target, self.cfg, arena_size=m.plan.size + 2 * align,
                                 **opts)
        except VTAError as e:
            raise VTAError(f"target {self.target} is not available: {e}") from None
        self.buf = self.dev.alloc(m.plan.size, align=align)
        self.view = self.buf.view()
        self.view[:len(m.const_image)] = np.frombuffer(m.const_image, np.uint8)
        self.programs = {k: relocate(kern.program, self.cfg, self.buf.addr)
                         for k, kern in m.kernels.items()}

    def close(self) -> None:
        if self.dev is not None:
            self.dev.close()
            self.dev = None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's outputs for ``feeds``; :attr:`last_report` says where each layer ran,
        its time and its cycles."""
        m, g = self.m, self.m.graph
        env: dict[str, Any] = dict(g.params)
        env.update(check_feeds(g, feeds))
        t_start = time.perf_counter()
        layers: list[LayerRecord] = []
        total = len(g.nodes)
        for k, n in enumerate(g.nodes):
            if self.progress:
                self.progress(k, total, n.name)
            where = m.partition.get(n.name, "cpu") if self.dev is not None else "cpu"
            t0 = time.perf_counter()
            cycles = None
            if where == "vta" and n.name in self.programs:
                out, cycles = self._run_vta(n, [(i, env[i]) for i in n.inputs
                                                if i not in g.params])
                if out is None:  # a timing-only device (perf): the data comes from the spec
                    out = kernel_for(n.op)(n, [env[i] for i in n.inputs])[0]
                res = [out]
            else:
                where = "cpu"
                args = [env[i] if i else None for i in n.inputs]
                res = self._run_cpu(n, args)
            dt = time.perf_counter() - t0
            for o, v in zip(n.outputs, res):
                env[o] = v
            kern = m.kernels.get(n.name) if where != "cpu" else None
            layers.append(LayerRecord(n.name, n.op, self.target if where != "cpu" else "cpu",
                                      m.macs.get(n.name, 0), dt, cycles,
                                      kern.gemm_macs if kern else None))
        if self.progress:
            self.progress(total, total, "")
        self.last_report = RunReport(self.target, tuple(layers), time.perf_counter() - t_start)
        return {o: env[o] for o in g.outputs}

    def _run_cpu(self, n: Any, args: list[Any]) -> list[np.ndarray]:
        """Node ``n`` on the CPU: its host kernel, else its reference kernel. A kernel that
        fails on the node's attributes (a module whose graph was edited after compilation:
        the digest only says the files are those the manifest lists) is a one-line error
        naming the node, as onnxruntime names the node that failed."""
        hk = self._host.get(n.name)
        try:
            return [hk(args)] if hk is not None else kernel_for(n.op)(n, args)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"node {n.name} ({n.op}) failed on the CPU ({type(e).__name__}: "
                             f"{e}); if its module was edited, recompile it") from None

    def _run_vta(self, n: Any, inputs: list[tuple[str, np.ndarray]]
                 ) -> tuple[np.ndarray | None, int | None]:
        """Pack the layer's activation inputs into their arena buffers, run its program."""
        m, cfg = self.m, self.cfg
        kern = m.kernels[n.name]
        pb = m.plan.buffers
        matmul = n.op == "QMatMul"  # its operands: data and weight tiles
        packs = matmul_inputs(*(x for _, x in inputs), cfg) if matmul else \
            [packed_input(x, cfg) for _, x in inputs]
        for (name, _), packed in zip(inputs, packs):
            ib = pb[name]
            self.view[ib.offset:ib.offset + packed.nbytes] = packed.reshape(-1).view(np.uint8)
        cycles = self.dev.run(self.programs[n.name]).cycles
        if not getattr(self.dev, "computes_results", True):
            return None, cycles
        oshape = m.shapes[n.outputs[0]]
        ob = pb[kern.output]
        if matmul:
            return matmul_output(self.view[ob.offset:ob.offset + ob.size], oshape, cfg), cycles
        o4 = layout4(oshape)
        nb = -(-o4[0] // cfg.batch)
        cb = -(-o4[1] // cfg.block)
        count = nb * cb * o4[2] * o4[3] * cfg.batch * cfg.block
        raw = self.view[ob.offset:ob.offset + count].view(np.int8)
        out = unpack_activation(raw.reshape(nb, cb, o4[2], o4[3], cfg.batch, cfg.block),
                                o4[0], o4[1])
        return out.reshape(oshape).copy(), cycles


def progress_printer(stream: Any = None) -> Callable[[int, int, str], None]:
    """A one-line progress bar on stderr (only drawn when stderr is a terminal)."""
    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()

    def show(k: int, total: int, name: str) -> None:
        if not tty:
            return
        width = 30
        done = int(width * k / max(total, 1))
        end = "\n" if k >= total else ""
        stream.write(f"\r[{'#' * done}{'.' * (width - done)}] {k}/{total} {name[:30]:<30}{end}")
        stream.flush()
    return show
