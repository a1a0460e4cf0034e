"""The micro-kernels of a command queue: the JIT table and the micro-op buffer's residency.

A :class:`KernelCache` memoizes finalized kernels per signature (``CommandQueue.kernel``; the
table is the device's, so kernels survive the queue), places kernels in the micro-op buffer
through a :class:`~vta.runtime.kernel.UopCache` (least recently used eviction; a device that
keeps its SRAM shares its cache with every queue), and turns a kernel into the fields of its
GEMM/ALU instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vta.isa import Config, Opcode

from .counters import QueueStats
from .errors import QueueError
from .kernel import GEMM, UopCache, UopKernel


class KernelCache:
    """Micro-kernels by signature, and where the resident ones are in the micro-op buffer.

    ``stats`` (the queue's statistics) receives ``uop_hits``, ``uop_misses`` and
    ``uop_evictions``."""

    def __init__(self, cfg: Config, uops: UopCache, jit: dict[Any, UopKernel],
                 stats: QueueStats) -> None:
        self.cfg = cfg
        self.uops = uops
        self.jit = jit
        self.stats = stats

    def kernel(self, signature: Any = None,
               build: Callable[[UopKernel], None] | None = None) -> UopKernel:
        """A new kernel builder; with ``signature`` and ``build`` the finalized kernel memoized
        per signature (``build(kernel)`` runs only the first time)."""
        if signature is None:
            return UopKernel(self.cfg)
        k = self.jit.get(signature)
        if k is None:
            if build is None:
                raise QueueError(f"no kernel recorded for signature {signature!r}; pass build=")
            k = UopKernel(self.cfg, name=str(signature))
            build(k)
            k.finalize()
            self.jit[signature] = k
        return k

    def resident(self, kernel: UopKernel) -> bool:
        return kernel.key in self.uops

    def lookup(self, kernel: UopKernel) -> int | None:
        """The micro-op buffer start of a resident kernel (a hit), or None."""
        start = self.uops.lookup(kernel.key)
        if start is not None:
            self.stats.uop_hits += 1
        return start

    def place(self, kernel: UopKernel) -> int:
        """Make room for a kernel that is not resident (a miss); its start. The caller loads
        its micro-ops there."""
        ev = self.uops.evictions
        start = self.uops.insert(kernel.key, kernel.size)
        self.stats.uop_misses += 1
        self.stats.uop_evictions += self.uops.evictions - ev
        return start

    def insn_fields(self, kernel: UopKernel) -> dict[str, int]:
        """The GEMM/ALU instruction fields of a kernel, without its micro-op range (cached on
        the kernel)."""
        if kernel._insn_fields is None or kernel._insn_cfg is not self.cfg:
            kernel._insn_fields = _insn_fields(kernel)
            kernel._insn_cfg = self.cfg
        return kernel._insn_fields

    def invalidate(self) -> None:
        """The device lost its micro-op buffer: nothing is resident."""
        self.uops.invalidate()


def _insn_fields(kernel: UopKernel) -> dict[str, int]:
    fields = kernel.loop_fields()
    fields["reset_reg"] = int(kernel.reset)
    if kernel.mode == GEMM:
        fields["opcode"] = int(Opcode.GEMM)
        return fields
    del fields["wgt_factor_out"], fields["wgt_factor_in"]
    fields.update(opcode=int(Opcode.ALU), alu_opcode=int(kernel.alu_opcode),
                  use_imm=int(kernel.use_imm), imm=int(kernel.imm))
    return fields


__all__ = ["KernelCache"]
