"""The manifest of a compiled module (``manifest.json``), as typed records.

:class:`ModuleManifest` is what :meth:`vta.compiler.graph.module.CompiledModule.save` writes and
:func:`vta.compiler.graph.module.load_module` reads: the format and its version, the
configuration, the compile's options, the graph, quantization, partition, one
:class:`KernelRecord` per VTA layer, the host kernels and a :class:`FileDigest` per file.
``to_json`` / ``from_json`` give the file's JSON; a missing or mistyped field is a one-line
:class:`ModuleError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, TypeVar

from vta.isa import Config
from vta.isa.records import JsonRecord

from .errors import ModuleError
from .ir import TensorInfo
from .options import CompileOptions
from .quant_info import QuantInfo

FORMAT = "vta-module"
#: 2: the manifest carries a sha256 and a size per file ("files"), checked at load.
#: 3: a digest (digest.json) covers every file, the manifest included, and is verified first;
#: every path of the manifest is a plain relative name of a file of the module.
#: 4: the compile's options (:class:`~vta.compiler.graph.options.CompileOptions`, the board
#: included) are recorded whole ("options"); the configuration carries the bus width.
VERSION = 4


class _Record(JsonRecord):
    error = ModuleError
    what = "manifest.json"


K = TypeVar("K", bound="KernelFields")


@dataclass(frozen=True)
class KernelFields:
    """One VTA layer: its program, what it computes, the knobs it was built with
    (``knob_source``: "default" or "tuning-log") and their cycles (the performance model's
    estimate for a default, the cycles `vta tune` measured for a tuned layer). The fields
    :class:`~vta.compiler.graph.module.Kernel` (the program's bytes, in memory) and
    :class:`KernelRecord` (the program's file, in the manifest) share."""

    node: str
    program: Any       #: the instruction stream (each subclass says in what form)
    macs: int
    gemm_macs: int     #: MACs the GEMM core executes (includes channel padding)
    insns: int
    template: str
    knobs: dict[str, int]
    knob_source: str
    cycles: float
    input: str         #: the layer's input tensor
    output: str        #: its output tensor

    def with_program(self, cls: type[K], program: Any) -> K:
        """The same layer as a ``cls`` (another subclass) holding ``program``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return cls(**{**values, "program": program})


@dataclass(frozen=True)
class KernelRecord(KernelFields, _Record):
    """The manifest's record of one VTA layer (see :class:`KernelFields`)."""

    program: str       #: the instruction stream's file, relative to the module directory


@dataclass(frozen=True)
class HostKernelRecord(_Record):
    """A CPU layer's LLVM kernel: its IR file."""

    node: str
    llvm_ir: str


@dataclass(frozen=True)
class FusionRecord(_Record):
    """Nodes that run as one kernel; ``master`` is the complex or reduction op, if any."""

    kind: str
    master: str | None
    nodes: list[str]


@dataclass(frozen=True)
class FileDigest(_Record):
    """The sha256 and the size of one file of the module."""

    sha256: str
    bytes: int


@dataclass(frozen=True)
class QuantizationRecord(_Record):
    """The quantization: a scale per tensor, a record per layer, and the int8 graph's
    agreement with float per output (cosine, top-1) on the first calibration input."""

    scheme: str
    scales: dict[str, float]
    layers: list[QuantInfo]
    agreement: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class ModuleManifest(_Record):
    """``manifest.json``: everything of a module but its binary files (see the module doc)."""

    format: str
    version: int
    config: Config
    options: CompileOptions  #: how the module was compiled (``vta compile``'s flags)
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    graph: dict[str, Any]  #: the graph's structure (:meth:`Graph.to_json`)
    quantization: QuantizationRecord
    partition: dict[str, str]  #: node -> "vta" or "cpu"
    fusion: list[FusionRecord]
    shapes: dict[str, list[int]]
    macs: dict[str, int]
    memory_plan: str  #: file names of the memory plan, the constant image and the parameters
    const_image: str
    params: str
    kernels: dict[str, KernelRecord]
    host_kernels: list[HostKernelRecord]
    notes: list[str]
    compile_seconds: float
    files: dict[str, FileDigest]  #: every other file of the directory

    @classmethod
    def from_json(cls, data: Any) -> ModuleManifest:
        """The manifest of ``data``; a file of another format or version is refused first
        (one line saying to recompile), then every field is checked."""
        if not isinstance(data, dict) or data.get("format") != FORMAT or \
                data.get("version") != VERSION:
            raise ModuleError(f"{cls.what} is not a {FORMAT} version {VERSION} manifest (made "
                              f"by another version of the kit?)")
        return super().from_json(data)


__all__ = ["ModuleManifest", "KernelFields", "KernelRecord", "HostKernelRecord", "FusionRecord",
           "FileDigest", "QuantizationRecord", "FORMAT", "VERSION"]
