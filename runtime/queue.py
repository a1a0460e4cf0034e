"""The command queue: TVM VTA runtime semantics over any device.

Three parts do the work: a :class:`~vta.runtime.program.ProgramBuilder` holds the program as
rows of instruction fields (encoded once, by the ISA's vectorised encoder) with its relocations,
a :class:`~vta.runtime.tokens.TokenTracker` inside it does the dependency-token bookkeeping of
TVM's ``runtime.cc``, and a :class:`~vta.runtime.kernel_cache.KernelCache` keeps the
micro-kernels and their residency in the micro-op buffer. The queue checks the calls and drives
the device:

* ``dep_pop(from, to)`` is lazy: the pop is set on the next instruction of stage ``to``;
* ``dep_push(from, to)`` sets the push flag on the last instruction of stage ``from`` (or emits a
  no-op of that stage: an ``x_size=0`` LOAD/STORE);
* ``synchronize()`` commits pending pops, drains every outstanding token, appends FINISH, runs the
  program on the device, waits and resets (the next program starts with empty token queues). An
  automatic flush (when the instruction buffer fills) drains the same way but re-pushes the
  outstanding tokens at the start of the next program, so the cut is invisible to the program;
* ``force_serial=True`` rewrites every program so each instruction waits for the previous one.

Stages (scopes) are "load", "compute" and "store" (or TVM's 1, 2, 3).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from typing import IO, Any

import numpy as np
from vta.isa import DEP_FLAGS, Config, MemType, Opcode
from vta.isa.layout import INSN_BYTES
from vta.isa.stats import RunStats

from .arena import Arena, DeviceBuffer, as_mem_type
from .counters import QueueStats, RecordStats
from .dump import dump_insns, dump_uops
from .errors import HazardWarning, QueueError
from .kernel import ALU, GEMM, UopCache, UopKernel
from .kernel_cache import KernelCache
from .program import ProgramBuilder, Row, mem_row, uop_load_row
from .record import RecordedProgram, Relocation
from .target import Target
from .tokens import (
    COMPUTE_STAGE,
    LOAD_STAGE,
    QUEUE_NAMES,
    STAGES,
    STORE_STAGE,
    as_stage,
    stage_pair,
)

#: Default instruction-buffer capacity (instructions per program, FINISH included).
DEFAULT_MAX_INSNS = 16384


class CommandQueue:
    """Builds VTA instruction streams and runs them on a device (or records them).

    Create one with :meth:`Device.command_queue` (run mode) or :meth:`CommandQueue.recorder`
    (record mode: :meth:`record` returns a relocatable :class:`RecordedProgram`).
    ``kernels``: the JIT table of finalized micro-kernels by signature (default: the device's,
    or a new one); recordings of one configuration may share one.
    """

    def __init__(self, device: Target | None = None, *, cfg: Config | None = None,
                 arena: Arena | None = None, record: bool = False,
                 max_insns: int = DEFAULT_MAX_INSNS, force_serial: bool = False,
                 dump_insn: bool = False, dump_uop: bool = False, hazards: str = "note",
                 out: IO[str] | None = None, kernels: dict[Any, UopKernel] | None = None
                 ) -> None:
        if device is None and (cfg is None or arena is None):
            raise QueueError("a CommandQueue needs a device, or cfg= and arena= in record mode")
        if device is None and not record:
            raise QueueError("a CommandQueue without a device can only record (record=True)")
        if hazards not in ("note", "warn", "error"):
            raise QueueError(f"hazards must be 'note', 'warn' or 'error', not {hazards!r}")
        self.device = device
        self.cfg: Config = cfg if cfg is not None else device.cfg  # type: ignore[union-attr]
        self.arena: Arena = arena if arena is not None else device.arena  # type: ignore[union-attr]
        if self.arena.cfg != self.cfg:
            raise QueueError("the arena was made for another configuration")
        self.recording = record
        self.max_insns = int(max_insns)
        if self.max_insns < 16:
            raise QueueError(f"max_insns={max_insns} is too small (at least 16)")
        self.force_serial = force_serial
        self.dump_insn = dump_insn
        self.dump_uop = dump_uop
        self.hazards = hazards
        self.out = out
        self._depth = {mt: self.cfg.depth(mt) for mt in MemType}
        self._ebytes = {mt: self.cfg.elem_bytes(mt) for mt in MemType}
        self.stats = QueueStats()
        uop_cache = UopCache(self.cfg.uop_depth) if record or device is None else \
            device.uop_cache
        if kernels is None:
            kernels = device.kernels if device is not None else {}
        self.kernels = KernelCache(self.cfg, uop_cache, kernels, self.stats)
        self._reported: set[bytes] = set()
        self._auto_flush = device is not None and device.keeps_sram
        self._carry = [0, 0, 0, 0]
        self._reset_segment()

    @classmethod
    def recorder(cls, cfg: Config, arena: Arena, **opts: Any) -> CommandQueue:
        """A queue that records into a relocatable program instead of running (no device)."""
        return cls(None, cfg=cfg, arena=arena, record=True, **opts)

    @property
    def uop_cache(self) -> UopCache:
        """Which micro-kernels are resident in the micro-op buffer."""
        return self.kernels.uops

    # ================================================================= segment state
    def _reset_segment(self) -> None:
        self._prog = ProgramBuilder(self.cfg, self.stats)
        self._work = 0
        self._kernels_used: list[UopKernel] = []
        self._seg_hits = 0
        self._epoch = self.device.runs if self.device is not None else 0
        carry, self._carry = self._carry, [0, 0, 0, 0]
        if not self.force_serial:
            self._prog.repush(carry)

    @property
    def pending(self) -> int:
        """Instructions generated since the last synchronize (FINISH not included)."""
        return len(self._prog)

    @property
    def tokens(self) -> dict[str, int]:
        """Outstanding tokens per queue in the current program (pushed, not yet popped)."""
        return self._prog.tokens.by_name()

    # ================================================================= emission
    def _emit(self, row: Row, stage: int) -> int:
        return self._prog.emit(row, stage)

    def _reserve(self, n: int) -> None:
        """Flush first when ``n`` more instructions would not leave room for the drain.

        Not when recording, and not on devices that lose their SRAM between runs (rtl, tsim):
        a cut there would drop live SRAM data, and their programs have no size limit."""
        if self.recording or not self._auto_flush:
            return
        if len(self._prog) + n + self._prog.tokens.drain_insns() <= self.max_insns:
            return
        self.stats.auto_flushes += 1
        self._flush(carry=True)
        if len(self._prog) + n + self._prog.tokens.drain_insns() > self.max_insns:
            raise QueueError(f"max_insns={self.max_insns} cannot hold one operation plus the "
                             f"outstanding tokens; raise max_insns")

    # ================================================================= dependencies
    def dep_push(self, from_stage: str | int, to_stage: str | int) -> None:
        """Stage ``from_stage`` signals ``to_stage`` (TVM's ``VTADepPush``): set on the last
        instruction of ``from_stage``, or a no-op of that stage is emitted."""
        frm, to = stage_pair(from_stage, to_stage)
        if self.force_serial:
            return
        self._reserve(2)  # a possible no-op, and one more token to drain
        self._work += 1
        self._prog.push(frm, to)

    def dep_pop(self, from_stage: str | int, to_stage: str | int) -> None:
        """Stage ``to_stage`` waits for a token from ``from_stage`` (TVM's ``VTADepPop``); lazy:
        absorbed by the next instruction of ``to_stage``."""
        frm, to = stage_pair(from_stage, to_stage)
        if self.force_serial:
            return
        self._reserve(2)
        self._prog.tokens.check_pop(frm, to)
        self._work += 1
        self._prog.pop(frm, to)

    # ================================================================= memory
    def load_buffer_2d(self, src: DeviceBuffer, src_elem_offset: int, x_size: int, y_size: int,
                       x_stride: int, x_pad_before: int = 0, y_pad_before: int = 0,
                       x_pad_after: int = 0, y_pad_after: int = 0,
                       dst_sram_index: int | None = None,
                       dst_memory_type: MemType | int | str | None = None) -> None:
        """LOAD a 2D strided block from ``src`` (TVM's ``VTALoadBuffer2D``, same argument order).

        ``src_elem_offset``, sizes and stride are in elements of ``dst_memory_type`` ("inp",
        "wgt" or "acc"); the SRAM receives (y_pad_before + y_size + y_pad_after) rows of
        (x_pad_before + x_size + x_pad_after) entries from ``dst_sram_index``, pads zero.
        """
        if dst_memory_type is None or dst_sram_index is None:
            raise QueueError("load_buffer_2d needs dst_sram_index and dst_memory_type")
        mt = self._mem_type(dst_memory_type, "load_buffer_2d")
        if mt in (MemType.OUT, MemType.UOP):
            raise QueueError(
                f"load_buffer_2d cannot load {mt.name}: load 'inp', 'wgt' or 'acc' "
                f"(micro-ops are loaded by push_gemm/push_alu)")
        _ints("load_buffer_2d", src_elem_offset=src_elem_offset, x_size=x_size, y_size=y_size,
              x_stride=x_stride, x_pad_before=x_pad_before, y_pad_before=y_pad_before,
              x_pad_after=x_pad_after, y_pad_after=y_pad_after, dst_sram_index=dst_sram_index)
        _size_checks("load_buffer_2d", x_size, y_size, x_stride)
        for name, v in (("x_pad_before", x_pad_before), ("y_pad_before", y_pad_before),
                        ("x_pad_after", x_pad_after), ("y_pad_after", y_pad_after)):
            if not 0 <= v <= 15:
                raise QueueError(f"load_buffer_2d: {name}={v} must be in 0..15 (4-bit field)")
        rows = y_pad_before + y_size + y_pad_after
        cols = x_pad_before + x_size + x_pad_after
        self._check_sram("load_buffer_2d", mt, dst_sram_index, rows * cols)
        dram = self._dram_addr("load_buffer_2d", src, mt, src_elem_offset, x_size, y_size,
                               x_stride)
        stage = COMPUTE_STAGE if mt == MemType.ACC else LOAD_STAGE
        self._reserve(1)
        row = mem_row(Opcode.LOAD, mt, sram_base=dst_sram_index, dram_base=dram, y_size=y_size,
                      x_size=x_size, x_stride=x_stride, y_pad_0=y_pad_before,
                      y_pad_1=y_pad_after, x_pad_0=x_pad_before, x_pad_1=x_pad_after)
        idx = self._emit(row, stage)
        self._note_reloc(idx, src, mt, src_elem_offset)
        self._work += 1
        self.stats.loads += 1

    def store_buffer_2d(self, src_sram_index: int, src_memory_type: MemType | int | str,
                        dst: DeviceBuffer, dst_elem_offset: int, x_size: int, y_size: int,
                        x_stride: int) -> None:
        """STORE accumulator entries (truncated to the output width) to ``dst`` (TVM's
        ``VTAStoreBuffer2D``, same argument order). ``src_memory_type`` must be "out"."""
        mt = self._mem_type(src_memory_type, "store_buffer_2d")
        if mt != MemType.OUT:
            raise QueueError(f"store_buffer_2d stores from 'out' (the accumulator read at the "
                             f"output width), not {mt.name.lower()!r}")
        _ints("store_buffer_2d", src_sram_index=src_sram_index, dst_elem_offset=dst_elem_offset,
              x_size=x_size, y_size=y_size, x_stride=x_stride)
        _size_checks("store_buffer_2d", x_size, y_size, x_stride)
        self._check_sram("store_buffer_2d", mt, src_sram_index, x_size * y_size)
        dram = self._dram_addr("store_buffer_2d", dst, mt, dst_elem_offset, x_size, y_size,
                               x_stride)
        self._reserve(1)
        row = mem_row(Opcode.STORE, mt, sram_base=src_sram_index, dram_base=dram,
                      y_size=y_size, x_size=x_size, x_stride=x_stride)
        idx = self._emit(row, STORE_STAGE)
        self._note_reloc(idx, dst, mt, dst_elem_offset)
        self._work += 1
        self.stats.stores += 1

    def _mem_type(self, value: MemType | int | str, what: str) -> MemType:
        try:
            return as_mem_type(value)
        except Exception as e:  # ArenaError -> QueueError with the call's name
            raise QueueError(f"{what}: {e}") from None

    def _check_sram(self, what: str, mt: MemType, index: int, entries: int) -> None:
        depth = self._depth[mt]
        if index < 0 or index + entries > depth:
            raise QueueError(
                f"{what}: SRAM entries [{index}, {index + entries}) are beyond the {mt.name} "
                f"buffer ({depth} entries)")

    def _dram_addr(self, what: str, buf: DeviceBuffer, mt: MemType, elem_offset: int,
                   x_size: int, y_size: int, x_stride: int) -> int:
        if not isinstance(buf, DeviceBuffer):
            raise QueueError(f"{what}: the DRAM operand must be a DeviceBuffer from this "
                             f"device's arena, not {type(buf).__name__}")
        if buf.arena is not self.arena:
            raise QueueError(f"{what}: {buf!r} belongs to another arena")
        if buf.freed:
            raise QueueError(f"{what}: {buf!r} was freed")
        eb = self._ebytes[mt]
        if buf.addr % eb:
            raise QueueError(
                f"{what}: buffer at byte address 0x{buf.addr:x} is not aligned to the {mt.name} "
                f"element size ({eb} B); allocate it with mem_type={mt.name.lower()!r}")
        n = buf.nbytes // eb
        end = elem_offset + (y_size - 1) * x_stride + x_size
        if elem_offset < 0 or end > n:
            raise QueueError(
                f"{what}: accesses {mt.name} elements [{elem_offset}, {end}) of a buffer that "
                f"holds {n} ({buf.nbytes} B of {eb} B elements)")
        addr = buf.addr // eb + elem_offset
        if addr >= 1 << 32:
            raise QueueError(f"{what}: element address {addr} does not fit 32 bits")
        return addr

    def _note_reloc(self, idx: int, buf: DeviceBuffer, mt: MemType, elem_offset: int) -> None:
        if self.recording:
            eb = self._ebytes[mt]
            if buf.offset % eb:
                raise QueueError(f"buffer offset {buf.offset} in the arena is not a multiple of "
                                 f"the {mt.name} element size ({eb} B): cannot relocate")
            self._prog.relocate_arena(idx, eb, buf.offset // eb + elem_offset)

    # ================================================================= compute
    def kernel(self, signature: Any = None,
               build: Callable[[UopKernel], None] | None = None) -> UopKernel:
        """A new micro-kernel builder; with ``signature`` and ``build``, the finalized kernel
        is memoized per device and ``build(kernel)`` only runs the first time (JIT)."""
        return self.kernels.kernel(signature, build)

    def push_gemm(self, kernel: UopKernel) -> None:
        """Run a GEMM micro-kernel (TVM's ``VTAPushGEMMOp``): LOAD UOP when not resident, then
        GEMM with the kernel's loops folded into iter_out/iter_in and the factors."""
        self._push(kernel, GEMM)

    def push_alu(self, kernel: UopKernel) -> None:
        """Run an ALU micro-kernel (TVM's ``VTAPushALUOp``)."""
        self._push(kernel, ALU)

    def preload(self, kernel: UopKernel) -> bool:
        """LOAD UOP ``kernel`` now, without running it, unless it is resident; returns whether
        it loaded. A program can so fetch its micro-kernels before its first dependency wait
        (a later ``push_gemm``/``push_alu`` of the kernel then hits the cache)."""
        if not isinstance(kernel, UopKernel):
            raise QueueError(f"preload takes a UopKernel, not {type(kernel).__name__}")
        if not kernel.final:
            kernel.finalize()
        if self.kernels.resident(kernel):
            return False
        self._reserve(1)
        self._load_uops(kernel, self.kernels.place(kernel))
        return True

    def _push(self, kernel: UopKernel, mode: str) -> None:
        self._check_kernel(kernel, mode)
        self._reserve(2)
        start = self.kernels.lookup(kernel)
        if start is None:
            start = self.kernels.place(kernel)
            self._load_uops(kernel, start)
        else:
            self._seg_hits += 1
        if mode == GEMM:
            self.stats.gemm += 1
        else:
            self.stats.alu += 1
        fields = {**self.kernels.insn_fields(kernel), "uop_bgn": start,
                  "uop_end": start + kernel.size}
        self._emit(("gemm" if mode == GEMM else "alu", fields), COMPUTE_STAGE)
        self._work += 1
        if self.dump_uop:
            self._kernels_used.append(kernel)

    def _check_kernel(self, kernel: UopKernel, mode: str) -> None:
        if not isinstance(kernel, UopKernel):
            raise QueueError(f"push_{mode} takes a UopKernel, not {type(kernel).__name__}")
        if kernel.cfg is not self.cfg and kernel.cfg != self.cfg:
            raise QueueError(f"push_{mode}: the kernel was built for another configuration")
        if not kernel.final:
            kernel.finalize()
        if kernel.mode != mode:
            raise QueueError(f"push_{mode}: the kernel's micro-ops are {kernel.mode} ops")
        if kernel.notes:
            self._report(kernel)

    def _load_uops(self, kernel: UopKernel, start: int) -> None:
        if self.recording:  # relocated against the micro-op segment's base
            dram = self._prog.uop_offset(kernel.key)
        else:
            dram = self.device.kernel_dram(kernel).elem_addr(MemType.UOP)  # type: ignore
        idx = self._emit(uop_load_row(start, dram, kernel.size), COMPUTE_STAGE)
        if self.recording:
            self._prog.relocate_uops(idx, dram)
        self.stats.uop_loads += 1

    def _report(self, kernel: UopKernel) -> None:
        if not kernel.notes or kernel.key in self._reported:
            return
        self._reported.add(kernel.key)
        for note in kernel.notes:
            msg = f"micro-kernel {kernel.name or kernel.mode}: {note}"
            if self.hazards == "error":
                raise QueueError(msg)
            self.stats.hazards.append(msg)
            if self.hazards == "warn":
                warnings.warn(msg, HazardWarning, stacklevel=5)

    # ================================================================= finishing
    def _finish_program(self, carry: bool = False) -> tuple[bytes, dict[int, Relocation]]:
        """Commit pops, drain tokens, append FINISH; returns the encoded program (and its
        relocations).

        With ``carry`` (an automatic flush) the tokens that were outstanding are re-pushed at
        the start of the next program, so the cut is invisible; an explicit synchronize or
        record() starts the next program with empty token queues."""
        if self.force_serial:
            rows, relocs = self._prog.serialized()
            self._carry = [0, 0, 0, 0]
        else:
            outstanding = list(self._prog.tokens.counts)
            self._prog.drain()
            rows, relocs = self._prog.finished()
            self._carry = outstanding if carry else [0, 0, 0, 0]
        return self._prog.encode(rows), relocs

    def synchronize(self, timeout: float | None = None) -> RunStats | None:
        """Finish the current program, run it on the device, wait, reset (TVM's
        ``VTASynchronize``). Returns the device's statistics of the run, None when there was
        nothing to run."""
        if self.recording:
            raise QueueError("this queue records: call record() instead of synchronize()")
        return self._flush(timeout)

    def _flush(self, timeout: float | None = None, carry: bool = False) -> RunStats | None:
        if not self._work:  # nothing to run; an explicit synchronize still resets the tokens
            if not carry:
                self._reset_segment()
            return None
        if self._seg_hits and self.device.runs != self._epoch:  # type: ignore[union-attr]
            self._carry = [0, 0, 0, 0]
            self.uop_cache.invalidate()
            self._reset_segment()
            raise QueueError(
                "another program ran on the device while this queue was building one that "
                "relies on micro-kernels resident in the micro-op buffer; the program was "
                "discarded: synchronize one queue before building on another")
        program, _ = self._finish_program(carry)
        n_insns = len(program) // INSN_BYTES
        self._dumps(program)
        self.stats.insns += n_insns
        self.stats.programs += 1
        t0 = time.perf_counter()
        try:
            result = self.device.run_queued(program, timeout=timeout)  # type: ignore[union-attr]
        finally:
            self.stats.device_seconds += time.perf_counter() - t0
            if not self.device.keeps_sram:  # type: ignore[union-attr]
                self.uop_cache.invalidate()
            self._reset_segment()
        return result

    def record(self) -> RecordedProgram:
        """Finish the current program and return it relocatable instead of running it."""
        if not self.recording:
            raise QueueError("record() needs a recording queue (CommandQueue.recorder(cfg, "
                             "arena) or device.command_queue(record=True))")
        program, relocs = self._finish_program()
        n_insns = len(program) // INSN_BYTES
        uops = bytes(self._prog.uop_segment)
        self._dumps(program)
        rec = RecordedProgram(
            cfg=self.cfg, program=program, relocations=sorted(relocs.values(),
                                                              key=lambda r: r.index),
            uops=uops, arena_base=self.arena.base,
            stats=RecordStats(insns=n_insns, uop_words=len(uops) // 4, gemm=self.stats.gemm,
                              alu=self.stats.alu, loads=self.stats.loads,
                              stores=self.stats.stores))
        self.stats.insns += n_insns
        self.stats.programs += 1
        self.uop_cache.invalidate()  # each recording assumes an empty micro-op buffer
        self._reset_segment()
        return rec

    # ================================================================= dumps
    def program_bytes(self) -> bytes:
        """The instructions generated so far (no drain, no FINISH), encoded."""
        return self._prog.encode()

    def dump_insns(self) -> str:
        """Disassembly of the instructions generated since the last synchronize."""
        return dump_insns(self.program_bytes(), self.cfg)

    def dump_uops(self, kernel: UopKernel | None = None) -> str:
        """Disassembly of one kernel's micro-ops, or of every kernel resident in SRAM."""
        if kernel is not None:
            return dump_uops(kernel.finalize().key, self.cfg)
        parts = []
        for key, (start, n) in sorted(self.uop_cache.resident().items(), key=lambda kv: kv[1]):
            parts.append(f"; micro-op buffer [{start}, {start + n})\n" + dump_uops(key, self.cfg))
        return "\n".join(parts)

    def _dumps(self, program: bytes) -> None:
        out = self.out or sys.stdout
        if self.dump_insn:
            print(f"; program of {len(program) // INSN_BYTES} instructions", file=out)
            print(dump_insns(program, self.cfg), file=out)
        if self.dump_uop:
            seen = set()
            for k in self._kernels_used:
                if k.key not in seen:
                    seen.add(k.key)
                    print(f"; micro-kernel {k.name or k.mode} ({k.size} uops)", file=out)
                    print(dump_uops(k.key, self.cfg), file=out)

    def __repr__(self) -> str:
        mode = "record" if self.recording else "run"
        return (f"<CommandQueue {mode} pending={len(self._prog)} "
                f"tokens={self._prog.tokens.counts}>")


def _ints(what: str, **values: Any) -> None:
    for name, v in values.items():
        if type(v) is not int and (isinstance(v, bool) or not isinstance(v, int | np.integer)):
            raise QueueError(f"{what}: {name} must be an integer, not {v!r}")


def _size_checks(what: str, x_size: int, y_size: int, x_stride: int) -> None:
    if not 1 <= x_size <= 0xFFFF:
        raise QueueError(f"{what}: x_size={x_size} must be in 1..65535")
    if not 1 <= y_size <= 0xFFFF:
        raise QueueError(f"{what}: y_size={y_size} must be in 1..65535")
    if not x_size <= x_stride <= 0xFFFF:
        raise QueueError(f"{what}: x_stride={x_stride} must be in x_size..65535 "
                         f"(x_size={x_size})")


__all__ = ["CommandQueue", "as_stage", "STAGES", "LOAD_STAGE", "COMPUTE_STAGE", "STORE_STAGE",
           "DEFAULT_MAX_INSNS", "QUEUE_NAMES", "DEP_FLAGS"]
