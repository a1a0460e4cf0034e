"""Micro-kernels: a loop description recorded into micro-ops, and the micro-op SRAM cache.

A :class:`UopKernel` is what TVM's ``VTAUopLoopBegin`` / ``VTAUopPush`` / ``VTAUopLoopEnd``
record: up to two loops (each with an extent and per-index factors) around a body of micro-ops
that share one mode (GEMM or ALU), one reset flag, one ALU opcode and one immediate. The loops are
folded into the GEMM/ALU instruction's ``iter_out``/``iter_in`` and ``*_factor_*`` fields; the
body becomes the micro-op words loaded into the micro-op buffer (LOAD UOP).

>>> from vta.isa import Config
>>> k = UopKernel(Config())
>>> k.loop_begin(4, dst_factor=1, src_factor=1, wgt_factor=0)
>>> k.push("gemm", reset=False, dst=0, src=0, wgt=0)
>>> k.loop_end()
>>> k.finalize().loop_fields()["iter_out"]
4

:class:`UopCache` tracks which kernels are resident in the micro-op buffer (LRU eviction over the
scratchpad); the command queue issues LOAD UOP only on a miss.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from vta.isa import AluOp, Config
from vta.isa.layout import ITER_BITS

from .errors import KernelError

GEMM, ALU = "gemm", "alu"
_MODES = {"gemm": GEMM, "alu": ALU, 0: GEMM, 1: ALU}  # TVM: VTA_UOP_GEM=0, VTA_UOP_ALU=1
_ALU_NAMES = {op.name.lower(): op for op in AluOp}
MAX_LOOPS = 2


@dataclass(frozen=True)
class Loop:
    """One kernel loop: ``extent`` iterations; each index advances by its factor per iteration."""

    extent: int
    dst_factor: int = 0
    src_factor: int = 0
    wgt_factor: int = 0


def as_alu_opcode(value: AluOp | int | str) -> AluOp:
    if isinstance(value, str):
        try:
            return _ALU_NAMES[value.lower()]
        except KeyError:
            raise KernelError(f"unknown ALU opcode {value!r}; use one of "
                              f"{', '.join(_ALU_NAMES)}") from None
    try:
        return AluOp(int(value))
    except (ValueError, TypeError):
        raise KernelError(f"unknown ALU opcode {value!r}; use one of "
                          f"{', '.join(_ALU_NAMES)}") from None


class UopKernel:
    """A micro-kernel under construction, then (after :meth:`finalize`) frozen.

    Build order: ``loop_begin`` (0 to 2 times), ``push`` (1 or more), ``loop_end`` (as many as
    begun). Every push of a kernel must agree on mode, reset, ALU opcode, use_imm and imm.
    """

    def __init__(self, cfg: Config, *, name: str = "") -> None:
        self.cfg = cfg
        self.name = name
        self.loops: list[Loop] = []
        self._open = 0
        self._closed = 0
        self._dst: list[int] = []
        self._src: list[int] = []
        self._wgt: list[int] = []
        self.mode: str | None = None
        self.reset = False
        self.alu_opcode = AluOp.ADD
        self.use_imm = False
        self.imm = 0
        self.notes: list[str] = []
        self.reordered = False
        self._final = False
        self.words: np.ndarray = np.zeros(0, dtype=np.uint32)
        self.key: bytes = b""
        self._insn_fields: dict[str, int] | None = None  # its GEMM/ALU fields (KernelCache)
        self._insn_cfg: Config | None = None

    # ----------------------------------------------------------------- recording
    def loop_begin(self, extent: int, dst_factor: int = 0, src_factor: int = 0,
                   wgt_factor: int = 0) -> None:
        """Open a loop (outer first). TVM's ``VTAUopLoopBegin``."""
        self._check_open("loop_begin")
        if self._dst:
            raise KernelError("loop_begin after push: open every loop before the first push")
        if len(self.loops) >= MAX_LOOPS:
            raise KernelError(f"a micro-kernel has at most {MAX_LOOPS} loops (iter_out, iter_in)")
        lim = (1 << ITER_BITS) - 1
        if not _is_int(extent) or not 1 <= extent <= lim:
            raise KernelError(f"loop extent {extent!r} must be an integer in 1..{lim}")
        for what, f in (("dst_factor", dst_factor), ("src_factor", src_factor),
                        ("wgt_factor", wgt_factor)):
            if not _is_int(f) or f < 0:
                raise KernelError(f"loop {what} {f!r} must be a non-negative integer")
        self.loops.append(Loop(int(extent), int(dst_factor), int(src_factor), int(wgt_factor)))
        self._open += 1

    def loop_end(self) -> None:
        """Close the innermost open loop. TVM's ``VTAUopLoopEnd``."""
        self._check_open("loop_end")
        if self._closed >= self._open:
            raise KernelError("loop_end without a matching loop_begin")
        self._closed += 1

    @contextmanager
    def loop(self, extent: int, dst_factor: int = 0, src_factor: int = 0,
             wgt_factor: int = 0) -> Iterator[None]:
        """``with k.loop(...):`` is loop_begin ... loop_end."""
        self.loop_begin(extent, dst_factor, src_factor, wgt_factor)
        yield
        self.loop_end()

    def push(self, mode: str | int, reset: bool | int, dst: int, src: int, wgt: int = 0,
             alu_opcode: AluOp | int | str = AluOp.ADD, use_imm: bool | int = False,
             imm: int = 0) -> None:
        """Append a micro-op. TVM's ``VTAUopPush(mode, reset_out, dst, src, wgt, opcode,
        use_imm, imm_val)``; mode is "gemm"/"alu" (or TVM's 0/1)."""
        self._check_open("push")
        if self._closed:
            raise KernelError("push after loop_end: every push goes inside the innermost loop")
        try:
            m = _MODES[mode.lower() if isinstance(mode, str) else mode]
        except (KeyError, TypeError):
            raise KernelError(f"micro-op mode {mode!r} must be 'gemm' or 'alu'") from None
        op = as_alu_opcode(alu_opcode) if m == ALU else AluOp.ADD
        use_imm = bool(use_imm) if m == ALU else False
        imm = int(imm) if m == ALU else 0
        if not (type(dst) is int and type(src) is int and type(wgt) is int
                and dst >= 0 and src >= 0 and wgt >= 0):  # (the usual case, checked at once)
            for what, v in (("dst", dst), ("src", src), ("wgt", wgt)):
                if not _is_int(v) or v < 0:
                    raise KernelError(f"micro-op {what} index {v!r} must be a non-negative "
                                      "integer")
        head = (m, bool(reset), op, use_imm, imm)
        mine = (self.mode, self.reset, self.alu_opcode, self.use_imm, self.imm)
        if self._dst and head != mine:
            raise KernelError(
                f"micro-op {len(self._dst)} has mode/reset/opcode/imm {_fmt_head(head)} but the "
                f"kernel has {_fmt_head(mine)}; start a new kernel")
        self.mode, self.reset, self.alu_opcode, self.use_imm, self.imm = head
        self._dst.append(int(dst))
        self._src.append(int(src))
        self._wgt.append(int(wgt))

    # ----------------------------------------------------------------- finishing
    def finalize(self, *, reorder: bool = True) -> UopKernel:
        """Check the description, reorder micro-ops to avoid back-to-back writes of the same
        accumulator entry (recording :attr:`notes` when impossible), encode. Idempotent."""
        if self._final:
            return self
        if not self._dst:
            raise KernelError("empty micro-kernel: push at least one micro-op")
        if self._closed != self._open:
            raise KernelError(f"{self._open - self._closed} loop(s) not closed with loop_end")
        cfg = self.cfg
        n = len(self._dst)
        if n > cfg.uop_depth:
            raise KernelError(f"micro-kernel of {n} micro-ops does not fit the micro-op buffer "
                              f"({cfg.uop_depth} entries); split it")
        if self.imm < -(1 << 15) or self.imm >= 1 << 15:
            raise KernelError(f"ALU immediate {self.imm} does not fit 16 signed bits")
        dst = np.array(self._dst, dtype=np.int64)
        src = np.array(self._src, dtype=np.int64)
        wgt = np.array(self._wgt, dtype=np.int64)
        self._check_ranges(dst, src, wgt)
        if reorder:
            order = self._reorder(dst, src)
            if order is not None:
                dst, src, wgt = dst[order], src[order], wgt[order]
                self.reordered = True
        self._report_hazards(dst)
        lay = cfg.layouts.uop
        fd, fs, fw = lay["dst_idx"], lay["src_idx"], lay["wgt_idx"]
        words = (dst << fd.offset) | (src << fs.offset) | (wgt << fw.offset)
        self.words = words.astype(np.uint32)
        self.key = self.words.tobytes()
        self._dst, self._src, self._wgt = dst.tolist(), src.tolist(), wgt.tolist()
        self._final = True
        return self

    @property
    def final(self) -> bool:
        return self._final

    @property
    def size(self) -> int:
        """Number of micro-ops."""
        return len(self._dst)

    @property
    def uops(self) -> list[tuple[int, int, int]]:
        """(dst, src, wgt) of each micro-op, in the (possibly reordered) final order."""
        return list(zip(self._dst, self._src, self._wgt))

    def loop_fields(self) -> dict[str, int]:
        """iter_out, iter_in and the six factors for the GEMM/ALU instruction."""
        outer = self.loops[0] if self.loops else Loop(1)
        inner = self.loops[1] if len(self.loops) > 1 else Loop(1)
        return {"iter_out": outer.extent, "iter_in": inner.extent,
                "dst_factor_out": outer.dst_factor, "dst_factor_in": inner.dst_factor,
                "src_factor_out": outer.src_factor, "src_factor_in": inner.src_factor,
                "wgt_factor_out": outer.wgt_factor, "wgt_factor_in": inner.wgt_factor}

    @property
    def uop_count(self) -> int:
        """Micro-op executions of one GEMM/ALU instruction running this kernel."""
        f = self.loop_fields()
        return self.size * f["iter_out"] * f["iter_in"]

    # ----------------------------------------------------------------- internals
    def _check_open(self, what: str) -> None:
        if self._final:
            raise KernelError(f"{what} on a finalized micro-kernel; build a new UopKernel")

    def _check_ranges(self, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray) -> None:
        cfg = self.cfg
        f = self.loop_fields()
        src_depth = cfg.inp_depth if self.mode == GEMM else cfg.acc_depth
        src_buf = "input" if self.mode == GEMM else "accumulator"
        checks = [("dst", dst, "dst", cfg.acc_depth, "accumulator", cfg.log_acc_depth),
                  ("src", src, "src", src_depth, src_buf,
                   cfg.log_inp_depth if self.mode == GEMM else cfg.log_acc_depth)]
        if self.mode == GEMM:
            checks.append(("wgt", wgt, "wgt", cfg.wgt_depth, "weight", cfg.log_wgt_depth))
        lay = cfg.layouts.uop
        for what, idx, fac, depth, buf, log_depth in checks:
            width = lay[f"{what}_idx"].width
            if int(idx.max()) >= 1 << width:
                raise KernelError(f"micro-op {what} index {int(idx.max())} does not fit its "
                                  f"{width}-bit field")
            for part in ("out", "in"):
                v = f[f"{fac}_factor_{part}"]
                if v >= 1 << max(log_depth, 1):
                    raise KernelError(f"loop {what}_factor {v} does not fit its "
                                      f"{max(log_depth, 1)}-bit field (buffer of {depth})")
            top = int(idx.max()) + (f["iter_out"] - 1) * f[f"{fac}_factor_out"] + \
                (f["iter_in"] - 1) * f[f"{fac}_factor_in"]
            if top >= depth:
                raise KernelError(
                    f"micro-kernel reaches {what} index {top}, beyond the {buf} buffer "
                    f"({depth} entries); reduce the loop extents, factors or indices")

    def _reorder(self, dst: np.ndarray, src: np.ndarray) -> np.ndarray | None:
        """A permutation avoiding consecutive equal dst, or None when none is needed."""
        n = dst.size
        if n < 2 or not np.any(dst[1:] == dst[:-1]):
            return None
        alu_reads = self.mode == ALU and not self.use_imm
        pending = list(range(n))
        order: list[int] = []
        last = -1
        while pending:
            pick = None
            for pos, i in enumerate(pending):
                if dst[i] == last:
                    continue
                if self.mode == ALU and not self._can_hoist(i, pending[:pos], dst, src,
                                                            alu_reads):
                    continue
                pick = pos
                break
            if pick is None:
                pick = 0  # every ready micro-op writes the same entry: keep program order
            i = pending.pop(pick)
            order.append(i)
            last = dst[i]
        perm = np.array(order, dtype=np.int64)
        return None if np.array_equal(perm, np.arange(n)) else perm

    @staticmethod
    def _can_hoist(i: int, before: list[int], dst: np.ndarray, src: np.ndarray,
                   reads: bool) -> bool:
        """ALU micro-op i may move before ``before`` when it touches none of their entries."""
        for j in before:
            if dst[j] == dst[i]:
                return False  # same entry: op order matters for SHR by register etc.
            if reads and (src[i] == dst[j] or src[j] == dst[i]):
                return False
        return True

    def _report_hazards(self, dst: np.ndarray) -> None:
        n = dst.size
        same = np.nonzero(dst[1:] == dst[:-1])[0] if n > 1 else np.zeros(0, dtype=np.int64)
        for k in same[:4]:
            self.notes.append(f"micro-ops {k} and {k + 1} both write accumulator entry "
                              f"{int(dst[k])} back to back (could not be reordered)")
        if same.size > 4:
            self.notes.append(f"... and {same.size - 4} more back-to-back pairs")
        f = self.loop_fields()
        first, last = int(dst[0]), int(dst[-1])
        if f["iter_in"] > 1 and last == first + f["dst_factor_in"]:
            self.notes.append(
                f"the last micro-op of an inner iteration and the first of the next both write "
                f"the same accumulator entry (dst {last}, inner dst_factor {f['dst_factor_in']})")
        elif f["iter_out"] > 1 and last + (f["iter_in"] - 1) * f["dst_factor_in"] == \
                first + f["dst_factor_out"]:
            self.notes.append(
                "the last micro-op of an outer iteration and the first of the next both write "
                "the same accumulator entry")

    def __repr__(self) -> str:
        state = "final" if self._final else "open"
        return (f"<UopKernel {self.name or ''} {self.mode} {self.size} uops "
                f"loops={[lp.extent for lp in self.loops]} {state}>")


#: isinstance tuple of integers (an ``A | B`` union is built at every call)
_INTEGERS = (int, np.integer)


def _is_int(v: object) -> bool:
    return type(v) is int or (isinstance(v, _INTEGERS) and not isinstance(v, bool))


def _fmt_head(head: tuple) -> str:
    m, reset, op, use_imm, imm = head
    s = f"{m} reset={int(reset)}"
    if m == ALU:
        s += f" {AluOp(op).name} use_imm={int(use_imm)} imm={imm}"
    return s


class UopCache:
    """Which kernels are resident in the micro-op buffer: LRU eviction, first-fit placement."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self._entries: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # key -> (start, n)
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def lookup(self, key: bytes) -> int | None:
        """The SRAM start of a resident kernel (and mark it most recently used), or None."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[0]

    def insert(self, key: bytes, size: int) -> int:
        """Place a kernel of ``size`` micro-ops, evicting least recently used ones as needed."""
        if size > self.depth:
            raise KernelError(f"micro-kernel of {size} micro-ops exceeds the micro-op buffer "
                              f"({self.depth} entries)")
        while True:
            start = self._find_gap(size)
            if start is not None:
                self._entries[key] = (start, size)
                return start
            self._entries.popitem(last=False)
            self.evictions += 1

    def _find_gap(self, size: int) -> int | None:
        pos = 0
        for start, n in sorted(self._entries.values()):
            if start - pos >= size:
                return pos
            pos = max(pos, start + n)
        return pos if self.depth - pos >= size else None

    def invalidate(self) -> None:
        """Forget every resident kernel (the device lost its SRAM contents)."""
        self._entries.clear()

    def resident(self) -> dict[bytes, tuple[int, int]]:
        return dict(self._entries)

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["UopKernel", "UopCache", "Loop", "GEMM", "ALU", "as_alu_opcode"]
