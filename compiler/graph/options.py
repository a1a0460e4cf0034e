"""The options of a compile (:class:`CompileOptions`): one frozen record that the CLI builds
once, :func:`~vta.compiler.graph.module.compile_graph` reads whole, and the module's manifest
records (``"options"``), so a module says how it was compiled.

What a compile reads beside its options is data (the graph, the calibration inputs, a tuning
log's lookup) or how to run it (worker processes, a progress callback): neither changes what the
options say, and the module is the same for any number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.isa.records import JsonRecord

from .. import ops
from .calibration import CALIBRATIONS
from .errors import InputError

#: The ops that run on VTA's GEMM core, and every op the partitioner sends to VTA (the
#: default of :attr:`CompileOptions.vta_ops`; the GEMM ops and the element-wise ones of VTA's
#: ALU): the op registry's.
#: Sorted, so that a module's manifest records them in one order.
VTA_OPS = tuple(sorted(ops.names(lambda o: o.gemm)))
LOWERED_OPS = tuple(sorted(ops.names(lambda o: o.lowered)))
#: Where the CPU layers' kernels come from: "llvm" (the operator compiler's LLVM IR, stored in
#: the module) or "numpy" (none stored: the reference kernels).
HOSTS = ("llvm", "numpy")


@dataclass(frozen=True)
class CompileOptions(JsonRecord):
    """How a graph is compiled (``vta compile``'s flags, one field each)."""

    error = InputError
    what = "compile options"

    #: Layers kept in float on the CPU (``--float-layer``).
    float_layers: tuple[str, ...] = ()
    #: int8 layers run on the CPU instead of VTA (``--cpu-layer``).
    cpu_layers: tuple[str, ...] = ()
    #: The ops the partitioner may send to VTA (``--no-vta``: none; ``--elementwise cpu``:
    #: :data:`VTA_OPS` only).
    vta_ops: tuple[str, ...] = LOWERED_OPS
    #: The first convolution stays float while it holds few of the MACs (not ``--quantize-first``).
    keep_first_float: bool = True
    #: The board the module is built for (``--board``), or None.
    board: str | None = None
    #: Default schedules may use virtual threads (``--buffering auto``); False keeps them to one.
    threads: bool = True
    #: Host kernels (``--host``): one of :data:`HOSTS`.
    host: str = "llvm"
    #: One weight scale per output channel (``--per-channel``).
    per_channel: bool = False
    #: How activation ranges are calibrated (``--calibration``): one of ``CALIBRATIONS``.
    calibration: str = CALIBRATIONS[0]
    #: Every scale a power of two (``--pow2-scales``).
    pow2: bool = False
    #: Fold the rounded weights' mean error into the bias (``--bias-correction``).
    bias_correction: bool = False
    #: Residual adds go into their conv's or dense layer's epilogue where that is faster
    #: (not ``--no-fuse``; :mod:`vta.compiler.graph.fuse`).
    fuse: bool = True

    def __post_init__(self) -> None:
        for name in ("float_layers", "cpu_layers", "vta_ops"):  # any iterable of names
            v = getattr(self, name)
            if isinstance(v, str):
                raise InputError(f"{name} must be a list of names, not the string {v!r}")
            object.__setattr__(self, name, tuple(sorted(v)) if isinstance(v, set | frozenset)
                               else tuple(v))
        if self.host not in HOSTS:
            raise InputError(f"unknown host kernels {self.host!r}; use {' or '.join(HOSTS)}")
        if self.calibration not in CALIBRATIONS:
            raise InputError(f"unknown calibration {self.calibration!r}; use one of "
                             f"{', '.join(CALIBRATIONS)}")
        unknown = sorted(set(self.vta_ops) - set(LOWERED_OPS))
        if unknown:
            raise InputError(f"vta_ops {', '.join(unknown)}: not an op VTA runs; choose among "
                             f"{', '.join(LOWERED_OPS)}")


__all__ = ["CompileOptions", "VTA_OPS", "LOWERED_OPS", "HOSTS"]
