"""Compiled modules: build (``compile_model``), save to / load from a directory.

A module directory (written atomically: a temporary directory renamed into place) holds:

- ``manifest.json`` (:class:`~vta.compiler.graph.manifest.ModuleManifest`): format version,
  config, the compile's options (:class:`~vta.compiler.graph.options.CompileOptions`, the
  board included), the quantized graph, inputs/outputs (shapes, dtypes), quantization (exponent
  per tensor, per-layer report), partition, fusion groups, per-kernel records;
- ``params.npz``: the graph's parameters (int8 weights, int32 biases, float params of CPU ops);
- ``const.bin``: the constant region of the DRAM arena (packed weights, biases, micro-ops);
- ``plan.json``: the static memory plan (arena size, offset of every tensor);
- ``kernels/NNN_<layer>.bin``: the instruction stream of each VTA layer, addressed relative to
  the arena base (relocated at load time); its micro-ops are in the constant region.

Every VTA layer is lowered by the operator compiler (:mod:`vta.compiler.graph.lowering`: topi
template -> schedule with knobs -> tir passes -> code generation in record mode) with the knobs
of a tuning log, else the template's default knobs (ranked by vta.sim.perf); the manifest
records per layer the knobs, where they came from and the cycles they were measured at.

A module is data, never code. ``digest.json`` (:mod:`vta.isa.digest`) holds one sha256 over
every file, the manifest included, and the manifest's ``files`` the sha256 and size of every
other file; :func:`load_module` verifies the digest before it reads anything else, so a damaged
module is a one-line :class:`ModuleError` naming the file, and every path the manifest gives is
a plain relative name of one of the module's files. The digest is no signature: a module must
come from a trusted source (docs/networks.md). The host kernels' LLVM IR is run only when it is
exactly what the kit emits for the module's graph (:func:`vta.compiler.graph.host.host_kernels`).
"""

from __future__ import annotations

import json
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.digest import (
    DIGEST_FILE,
    FileEntry,
    is_output_or_empty,
    listing,
    verify_digest,
    write_digest,
)
from vta.isa.errors import VTAError
from vta.isa.fileio import atomic_dir, loads_json, read_text

from .. import ops
from ..build import arena_align
from ..ops import has_kernel, node_macs
from ..topi import defaults
from ..topi.defaults import Choice
from ..topi.pack import packed_nbytes
from ..topi.residual import fitted_knobs
from . import fuse as fusion_pass
from .calibration import qdq_ranges, synthetic_samples
from .errors import InputError, ModelError, ModuleError
from .host import host_kernel
from .immediates import immediates, patched, shape_key
from .int8_executor import run_quantized
from .ir import Graph, Node, TensorInfo
from .lowering import (
    AluLayer,
    Recorded,
    VtaLayer,
    gemm_macs,
    layout4,
    matmul_buffers,
    place,
    plan_node,
    record_layer,
)
from .manifest import (
    FORMAT,
    VERSION,
    FileDigest,
    FusionRecord,
    HostKernelRecord,
    KernelFields,
    KernelRecord,
    ModuleManifest,
    QuantizationRecord,
)
from .offsets import offset_tensors
from .options import CompileOptions
from .passes import fusion_groups, optimize
from .plan import MemoryPlan, plan_memory
from .quant_error import layer_errors
from .quant_info import QuantInfo
from .quantize import float_first_conv, quantize_graph
from .reference import infer_shapes
from .summary import cpu_reasons, fallback_notes
from .workers import Workers, check_jobs

#: The options of a compile that is given none (each field at its default).
DEFAULT_OPTIONS = CompileOptions()

#: A tuning-log lookup: (layer) -> (knobs, measured cycles) or None when the log has not tuned
#: its workload (built by vta.tune.vta_tasks.tuning_lookup; the compiler does not import tune).
Lookup = Callable[[Any], "tuple[dict[str, int], float] | None"]


@dataclass(frozen=True)
class Kernel(KernelFields):
    """One VTA layer in memory: its instruction stream's bytes and what the manifest records
    of it (:class:`~vta.compiler.graph.manifest.KernelFields`)."""

    program: bytes

    def record(self, path: str) -> KernelRecord:
        """The manifest's record of this kernel, its program stored at ``path``."""
        return self.with_program(KernelRecord, path)

    @classmethod
    def from_record(cls, rec: KernelRecord, program: bytes) -> Kernel:
        """The kernel ``rec`` records, given its program's bytes."""
        return rec.with_program(cls, program)


@dataclass
class CompiledModule:
    cfg: Config
    graph: Graph  #: the quantized graph (int8 and float ops)
    scales: dict[str, float]
    layers: list[QuantInfo]
    partition: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    plan: MemoryPlan
    const_image: bytes
    kernels: dict[str, Kernel]
    options: CompileOptions = DEFAULT_OPTIONS  #: how it was compiled (the board included)
    fusion: list[FusionRecord] = field(default_factory=list)
    macs: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: LLVM IR of the host kernels (node -> IR text), when the operator compiler built them
    host_ir: dict[str, str] = field(default_factory=dict)
    #: output -> cosine / top-1 of the int8 graph against float on the first calibration input
    agreement: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def board(self) -> str | None:
        """The board the module was compiled for (``--board``), or None."""
        return self.options.board

    @property
    def tuned_knobs(self) -> dict[str, dict[str, int]]:
        """Layer -> knobs of the layers built with a tuning log's knobs."""
        return {k: v.knobs for k, v in self.kernels.items() if v.knob_source == "tuning-log"}

    @property
    def inputs(self) -> dict[str, Any]:
        return self.graph.inputs

    @property
    def outputs(self) -> list[str]:
        return self.graph.outputs

    # --------------------------------------------------------------------- save
    def save(self, out_dir: str | Path) -> Path:
        """Write the module directory atomically (all or nothing)."""
        out = Path(out_dir)
        with atomic_dir(out, "compiled module", replaceable=is_module_or_empty) as tmp:
            self._write(tmp)
            write_digest(tmp, FORMAT, VERSION)
        return out

    def _write(self, d: Path) -> None:
        (d / "kernels").mkdir()
        kernels = {}
        for k, (name, kern) in enumerate(self.kernels.items()):
            path = f"kernels/{k:03d}_{_safe(name)}.bin"
            (d / path).write_bytes(kern.program)
            kernels[name] = kern.record(path)
        host = []
        if self.host_ir:
            (d / "host").mkdir()
        for k, (name, ir) in enumerate(self.host_ir.items()):
            path = f"host/{k:03d}_{_safe(name)}.ll"
            (d / path).write_text(ir)
            host.append(HostKernelRecord(node=name, llvm_ir=path))
        np.savez(d / "params.npz", **self.graph.params)
        (d / "const.bin").write_bytes(self.const_image)
        (d / "plan.json").write_text(json.dumps(self.plan.to_dict(), indent=1) + "\n")
        manifest = self.manifest(kernels, host, _file_digests(d))
        (d / "manifest.json").write_text(json.dumps(manifest.to_json(), indent=1) + "\n")

    def manifest(self, kernels: dict[str, KernelRecord], host: list[HostKernelRecord],
                 files: dict[str, FileDigest]) -> ModuleManifest:
        """The module's manifest, given its kernel and host kernel records and file digests."""
        return ModuleManifest(
            format=FORMAT, version=VERSION, config=self.cfg, options=self.options,
            inputs=dict(self.graph.inputs),
            outputs={o: TensorInfo(tuple(self.shapes[o]), "float32") for o in self.graph.outputs},
            graph=self.graph.to_json(),
            quantization=QuantizationRecord(
                scheme="int8, symmetric (value = q * scale)", scales=self.scales,
                layers=list(self.layers), agreement=self.agreement),
            partition=self.partition,
            fusion=list(self.fusion),
            shapes={k: list(v) for k, v in self.shapes.items()}, macs=self.macs,
            memory_plan="plan.json", const_image="const.bin", params="params.npz",
            kernels=kernels, host_kernels=host, notes=self.notes,
            compile_seconds=round(self.compile_seconds, 3), files=files)


def _check_layer_names(g: Graph, names: Iterable[str], option: str) -> None:
    """Every name given must be a layer of ``g`` (an InputError naming the others)."""
    known = {n.name for n in g.nodes}
    unknown = set(names) - known
    if unknown:
        raise InputError(f"{option} {', '.join(sorted(unknown))}: no such layer; layers are "
                         f"named like {', '.join(n.name for n in g.nodes[:4])}, ...")


def is_module_or_empty(d: Path) -> bool:
    """What ``save`` may replace: an empty directory or wholly an earlier compiled module (its
    digest holds: no file added, removed or changed)."""
    return is_output_or_empty(d, FORMAT, VERSION)


def _file_digests(d: Path) -> dict[str, FileDigest]:
    """sha256 and size of every file under ``d`` (POSIX relative path -> digest)."""
    return {rel: FileDigest(e.sha256, e.bytes)
            for rel, e in listing(d, "compiled module", ModuleError).items()}


def _verify(d: Path) -> ModuleManifest:
    """Verify the module's digest (one line naming the first damaged file otherwise), then
    read its manifest and check that it lists exactly the module's files, each path a plain
    relative name of one of them."""
    try:
        found = verify_digest(d, FORMAT, "module", ModuleError)
    except ModuleError as e:
        if (d / "manifest.json").is_file() and not (d / DIGEST_FILE).exists():
            raise ModuleError(f"module {d} has no {DIGEST_FILE}: it was made by an older "
                              f"version of the kit (module format before {VERSION}); "
                              "recompile it") from None
        raise ModuleError(f"{e}; recompile the module") from None
    if found.version != VERSION:
        raise ModuleError(f"module {d} is a {FORMAT} version {found.version}, this kit reads "
                          f"version {VERSION}; recompile it")
    if not found.holds:
        raise ModuleError(f"module {d}: {_damage(d, found.files)}; recompile it")
    try:
        mf = d / "manifest.json"
        m = ModuleManifest.from_json(loads_json(read_text(mf, "manifest"), mf))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModuleError(f"module {d}: manifest.json is not valid JSON ({e}); recompile "
                          "it") from None
    except OSError as e:
        raise ModuleError(f"module {d}: cannot read manifest.json ({e.strerror or e}); "
                          "recompile it") from None
    except ModuleError as e:
        raise ModuleError(f"module {d}: {e}; recompile it with this kit") from None
    listed = {rel: FileDigest(e.sha256, e.bytes) for rel, e in found.files.items()
              if rel != "manifest.json"}
    if m.files != listed:
        raise ModuleError(f"module {d}: manifest.json's file list is not the module's files; "
                          "recompile it")
    for field_name, rel in _manifest_paths(m):
        _check_path(d, field_name, rel, listed)
    return m


def _damage(d: Path, found: Mapping[str, FileEntry]) -> str:
    """Why a module's digest does not hold, naming the first damaged file: from the
    manifest's file list when it still reads, else the manifest itself."""
    try:
        files = json.loads((d / "manifest.json").read_bytes())["files"]
        want = {rel: (str(v["sha256"]), int(v["bytes"])) for rel, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return "manifest.json is damaged (the module's digest does not hold)"
    for rel, (sha, size) in want.items():
        got = found.get(rel)
        if got is None:
            return f"file {rel} is missing"
        if got.bytes != size:
            return (f"file {rel} is damaged ({got.bytes} bytes, the manifest says {size}: "
                    "truncated or replaced)")
        if got.sha256 != sha:
            return (f"file {rel} is damaged (its sha256 differs from the manifest's: the file "
                    "was modified)")
    extra = sorted(set(found) - set(want) - {"manifest.json"})
    if extra:
        return f"file {extra[0]} is not part of the module (it was added)"
    return "manifest.json was modified (the module's digest does not hold)"


def _manifest_paths(m: ModuleManifest) -> list[tuple[str, str]]:
    """Every (field, path) of a manifest that names a file of the module."""
    paths = [("memory_plan", m.memory_plan), ("const_image", m.const_image),
             ("params", m.params)]
    paths += [(f"kernels.{k}.program", r.program) for k, r in m.kernels.items()]
    paths += [(f"host_kernels.{i}.llvm_ir", h.llvm_ir) for i, h in enumerate(m.host_kernels)]
    return paths


def _check_path(d: Path, field_name: str, rel: str, files: Mapping[str, Any]) -> None:
    """``rel`` is a plain relative name (no absolute path, no ``..``, no backslash) of one of
    the module's files (regular files: the digest's listing follows no link)."""
    parts = rel.split("/")
    if rel.startswith("/") or "\\" in rel or "\0" in rel or \
            any(p in ("", ".", "..") for p in parts):
        raise ModuleError(f"module {d}: manifest field {field_name} {rel!r} is not a plain "
                          "relative name inside the module; recompile it")
    if rel not in files:
        raise ModuleError(f"module {d}: manifest field {field_name} names {rel!r}, which is "
                          "not a file of the module; recompile it")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def _check_consistent(m: ModuleManifest, g: Graph, plan: MemoryPlan) -> None:
    """The manifest's other fields agree with its graph (a :class:`ModelError` otherwise): a
    shape for every tensor a node makes, a place for every node, a kernel for exactly the VTA
    nodes, whose arena buffers the memory plan holds, and the graph's outputs those the
    manifest lists."""
    for n in g.nodes:
        if not has_kernel(n.op):
            raise ModelError(f"node {n.name} has op {n.op!r}, which this kit does not run")
    made = [o for n in g.nodes for o in n.outputs]
    for t in [*made, *g.inputs]:
        if t not in m.shapes:
            raise ModelError(f"tensor {t!r} has no shape")
    for n in g.nodes:
        if m.partition.get(n.name) not in ("vta", "cpu"):
            raise ModelError(f"node {n.name} is placed neither on vta nor on the cpu")
    vta = {n.name: n for n in g.nodes if m.partition[n.name] == "vta"}
    if set(m.partition) != {n.name for n in g.nodes} or set(m.kernels) != set(vta):
        raise ModelError("the partition or the kernels do not name the graph's nodes")
    for name, k in m.kernels.items():
        n = vta[name]
        if k.input not in n.inputs or k.output not in n.outputs:
            raise ModelError(f"kernel {name}'s operands are not its node's")
        for t, nbytes in vta_buffers(n, m.shapes, g.params, m.config).items():
            _check_buffer(plan, t, nbytes)
    if set(m.outputs) != set(g.outputs) or set(m.inputs) != set(g.inputs):
        raise ModelError("the module's inputs or outputs are not its graph's")


def vta_buffers(n: Node, shapes: Mapping[str, Sequence[int]], params: Mapping[str, Any],
                cfg: Config) -> dict[str, int]:
    """The bytes a VTA layer's program reads or writes of each of its activations: packed as
    :func:`~vta.compiler.graph.lowering.layout4` says, a ``QMatMul``'s as data and weight
    tiles (:func:`~vta.compiler.graph.lowering.matmul_buffers`)."""
    if not all(isinstance(t, str) and t for t in [*n.inputs, *n.outputs]):
        raise ModelError(f"VTA layer {n.name} has an omitted operand")
    acts = [t for t in [*n.inputs, *n.outputs] if t not in params]
    for t in acts:
        if len(shapes[t]) < 2:
            raise ModelError(f"tensor {t!r} of a VTA layer has shape {list(shapes[t])} (not "
                             "of rank 2 or more)")
    if n.op == "QMatMul":
        return matmul_buffers(n, shapes, cfg)
    return {t: packed_nbytes(layout4(shapes[t]), cfg.batch, cfg.block) for t in acts}


def _check_buffer(plan: MemoryPlan, t: str, packed: int) -> None:
    """Tensor ``t`` of a VTA layer has an arena buffer inside the arena that holds its
    ``packed`` bytes."""
    b = plan.buffers.get(t)
    if b is None:
        raise ModelError(f"tensor {t!r} of a VTA layer has no arena buffer")
    if not 0 <= b.offset <= b.offset + packed <= min(b.offset + b.size, plan.size):
        raise ModelError(f"tensor {t!r} does not fit its arena buffer")


def load_module(path: str | Path) -> CompiledModule:
    """Read a module directory written by :meth:`CompiledModule.save`, after verifying its
    digest and its manifest's paths (:func:`_verify`)."""
    d = Path(path)
    if not d.is_dir():
        raise ModuleError(f"{d} is not a compiled module directory (run vta compile first)")
    if not (d / "manifest.json").exists() and not (d / DIGEST_FILE).exists():
        raise ModuleError(f"{d} has no manifest.json; it is not a compiled module "
                          f"(vta compile MODEL.onnx -o {d})")
    m = _verify(d)
    try:
        with np.load(d / m.params, allow_pickle=False) as z:
            params = {k: z[k] for k in z.files}
        graph = Graph.from_json(m.graph, params)
        plan = MemoryPlan.from_dict(loads_json((d / m.memory_plan).read_text(), m.memory_plan))
        const = (d / m.const_image).read_bytes()
        kernels = {name: Kernel.from_record(k, (d / k.program).read_bytes())
                   for name, k in m.kernels.items()}
        host_ir = {h.node: (d / h.llvm_ir).read_text() for h in m.host_kernels}
        _check_consistent(m, graph, plan)
    except ModelError as e:
        raise ModuleError(f"module {d}: its graph is inconsistent ({e}); recompile it") from None
    except (KeyError, OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile) as e:
        raise ModuleError(f"module {d} is incomplete or corrupt ({type(e).__name__}: {e}); "
                          f"recompile it") from None
    q = m.quantization
    return CompiledModule(m.config, graph, dict(q.scales), list(q.layers), dict(m.partition),
                          {k: tuple(v) for k, v in m.shapes.items()}, plan, const, kernels,
                          m.options, list(m.fusion), dict(m.macs), m.compile_seconds,
                          list(m.notes), host_ir, dict(q.agreement))


# ---------------------------------------------------------------------- compile
def compile_graph(g: Graph, cfg: Config, options: CompileOptions = DEFAULT_OPTIONS, *,
                  samples: Sequence[Mapping[str, np.ndarray]] = (), tuned: Lookup | None = None,
                  jobs: int | None = None, progress: Progress | None = None) -> CompiledModule:
    """Optimize, quantize, partition, plan and lower a float graph as ``options`` say (the
    module records them). Every VTA layer goes through the operator compiler with the knobs
    ``tuned`` gives for it (a tuning log), else its template's default knobs. ``samples``:
    the calibration inputs (default: synthetic ones). ``jobs``: worker processes for the
    default-knob searches and the recordings (None: the CPUs this process may use; 1:
    in-process; more than 1: the conv and dense layers' searches start before quantization,
    :func:`_search_ahead`); the module is the same for every value. ``progress(k, total)``
    follows the searches. With ``options.fuse``, residual adds go into the epilogue of the
    conv or dense layer that produces one operand where vta.sim.perf finds that faster
    (:mod:`vta.compiler.graph.fuse`)."""
    o = options
    jobs = check_jobs(jobs)
    t0 = time.perf_counter()
    og = optimize(g)
    _check_layer_names(og, o.cpu_layers, "--cpu-layer")
    samples = list(samples) or synthetic_samples(og)
    _preload()
    with Workers(jobs) as workers:
        ahead = None
        if tuned is None and workers.jobs > 1:
            ahead = _search_ahead(og, cfg, o, workers, progress)
        qr = quantize_graph(og, samples, float_layers=o.float_layers,
                            keep_first_float=o.keep_first_float, per_channel=o.per_channel,
                            calibration=o.calibration, pow2=o.pow2,
                            bias_correction=o.bias_correction)
        qg = qr.graph
        env = run_quantized(qg, samples[0], keep=True)
        agree = layer_errors(og, qr, samples[0], env, qr.float_env)  # calibration: samples[0]
        qr.float_env = None
        shapes = {k: tuple(np.shape(v)) for k, v in env.items() if k not in qg.params}
        known = dict(k for k in ahead() if k is not None) if ahead is not None else {}
        partition, notes, built, fused = _lower_layers(qg, shapes, cfg, o, tuned, workers,
                                                       known, progress)
    retuned = [f.layer for f in fused if tuned is not None and
               tuned(plan_node(qg.node(f.layer), shapes, qg.params, cfg)) is not None]
    qg = fusion_pass.apply(qg, fused)
    partition = {n.name: partition[n.name] for n in qg.nodes}
    built = {n.name: built[n.name] for n in qg.nodes if n.name in built}  # the graph's order
    shapes = {k: v for k, v in shapes.items() if k not in {f.tensor for f in fused}}
    notes = fallback_notes(cpu_reasons(qg, qr.layers, partition, notes, o.cpu_layers,
                                       o.vta_ops), qg)
    if retuned:
        notes.append(f"tuning log: {len(retuned)} tuned layer(s) ({', '.join(retuned[:3])}"
                     f"{', ...' if len(retuned) > 3 else ''}) got their residual add fused in, "
                     "a workload the log has not tuned: they keep its knobs, timed by the "
                     "performance model (--no-fuse compiles the log's workloads)")
    plan = _plan(qg, shapes, qr.scales, cfg, built)
    image = bytearray(plan.const_size)
    kernels: dict[str, Kernel] = {}
    pb = plan.buffers
    for name, lb in built.items():
        n = qg.node(name)
        for key, data in lb.blobs.items():
            image[pb[key].offset:pb[key].offset + len(data)] = data
        operands = [pb[i].offset for i in n.inputs if i not in qg.params] \
            + [pb[k].offset for k in lb.blobs if not k.endswith(".uop")] \
            + [pb[n.outputs[0]].offset]
        program = place(lb.recorded, operands, pb[f"{name}.uop"].offset)
        kernels[name] = Kernel(name, program, node_macs(n, shapes, qg.params),
                               gemm_macs(program, cfg), len(program) // 16, lb.layer.template,
                               lb.knobs, lb.source, lb.cycles, n.inputs[0], n.outputs[0])
    macs = {n.name: node_macs(n, shapes, qg.params) for n in qg.nodes}
    fusion = [FusionRecord(f.kind, f.master, list(f.nodes)) for f in fusion_groups(qg)]
    host_ir: dict[str, str] = {}
    if o.host == "llvm":  # the CPU nodes' LLVM kernels (IR only: `vta run` JIT-compiles it)

        for n in qg.nodes:
            if partition[n.name] == "cpu":
                hk = host_kernel(n, shapes, qg.params)
                if hk is not None:
                    host_ir[n.name] = hk.text()
    return CompiledModule(cfg, qg, qr.scales, qr.layers, partition, shapes, plan, bytes(image),
                          kernels, o, fusion, macs, time.perf_counter() - t0, notes,
                          host_ir, agree)


@dataclass
class _Built:
    layer: VtaLayer | AluLayer
    recorded: Recorded
    blobs: dict[str, bytes]  #: constant operands in argument order, then the micro-ops
    knobs: dict[str, int]
    source: str
    cycles: float


def _lower_layers(qg: Graph, shapes: Mapping[str, tuple[int, ...]], cfg: Config,
                  o: CompileOptions, tuned: Lookup | None, workers: Workers,
                  known: Mapping[str, Choice], progress: Progress | None
                  ) -> tuple[dict[str, str], dict[str, str], dict[str, _Built],
                             list[fusion_pass.Fusion]]:
    """Partition: every VTA-capable layer that lowers goes to VTA (recorded programs at
    scratch offsets, one recording per layer shape and knobs, the other layers' immediates
    patched in: :func:`_record_by_shape`); the others stay on the CPU, with
    the reason (layer -> why it does not lower; the module's notes). The default-knob
    searches (but those in ``known``, by knob cache key: :func:`_search_ahead`) and the
    recordings run in the worker processes. With ``fuse``, the residual adds fused into their
    layers' epilogues where that is faster (:func:`_fusions`; their nodes replace the pairs in
    the partition and the built layers; the caller rewrites the graph)."""
    partition = {n.name: "cpu" for n in qg.nodes}
    notes: dict[str, str] = {}
    planned: dict[str, tuple[VtaLayer | AluLayer, tuple[dict[str, int], float] | None]] = {}
    for n in qg.nodes:
        if n.op not in o.vta_ops or not ops.has(n.op, "lowered") or n.name in o.cpu_layers:
            continue
        try:
            layer = plan_node(n, shapes, qg.params, cfg)
        except VTAError as e:
            notes[n.name] = str(e).splitlines()[0]
            continue
        hit = tuned(layer) if tuned is not None else None  # a bad log is an error, no fallback
        planned[n.name] = (layer, hit)
    works = [replace(layer, node="") for layer, hit in planned.values() if hit is None]
    choices, recorded = _default_knobs(works, cfg, o.threads, workers, known, progress)
    wanted: dict[str, tuple[Any, dict[str, int], float, str] | str] = {}
    for name, (layer, hit) in planned.items():
        work = replace(layer, node="")  # the workload: equal layers share a choice
        ch = (Choice(dict(hit[0]), float(hit[1]), 0) if hit is not None
              else choices[work])
        wanted[name] = ch if isinstance(ch, str) else (
            (work, _knob_key(ch.knobs)), ch.knobs, ch.cycles,
            "default" if hit is None else "tuning-log")
    nodes = {n.name: n for n in qg.nodes}
    fused = _fusions(qg, shapes, cfg, wanted, workers) if o.fuse else []
    for f, layer, ch in fused:
        del wanted[f.layer], wanted[f.add]
        wanted[f.node.name] = ((layer, _knob_key(ch.knobs)), ch.knobs, ch.cycles, "default")
        planned[f.node.name] = (layer, None)
        nodes[f.node.name] = f.node
    todo = list(dict.fromkeys(w[0] for w in wanted.values()
                              if not isinstance(w, str) and w[0] not in recorded))
    _record_by_shape(todo, recorded, cfg, workers)
    built: dict[str, _Built] = {}
    for name, w in wanted.items():
        r = w if isinstance(w, str) else recorded[w[0]]
        if isinstance(r, str):
            notes[name] = r
            continue
        layer, n = planned[name][0], nodes[name]
        _, knobs, cycles, source = w
        consts = layer.constants(cfg, n, qg.params)
        blobs = {f"{name}.{v}": b for v, b in zip(("wgt", *layer.vectors), consts)}
        blobs[f"{name}.uop"] = r.rec.uops
        built[name] = _Built(layer, r, blobs, knobs, source, cycles)
        partition[name] = "vta"
    return partition, notes, built, [f for f, _, _ in fused]


def _record_by_shape(todo: Sequence[tuple[Any, tuple]], recorded: dict[tuple, Recorded | str],
                     cfg: Config, workers: Workers) -> None:
    """Record the programs of ``todo`` (workload, knob key) into ``recorded``: one per shape
    and knobs (:func:`~vta.compiler.graph.immediates.shape_key`; a program already in
    ``recorded`` counts), the others' immediates patched into a copy of it (where a patch is
    refused, recorded too)."""
    firsts: dict[tuple, tuple[Any, tuple]] = {}
    for (w, k), r in recorded.items():
        sk = shape_key(w)
        if sk is not None and not isinstance(r, str):
            firsts.setdefault((sk, k), (w, k))
    first, rest = [], []
    for w, k in todo:
        sk = shape_key(w)
        if sk is not None and (sk, k) in firsts:
            rest.append(((w, k), firsts[(sk, k)]))
            continue
        if sk is not None:
            firsts[(sk, k)] = (w, k)
        first.append((w, k))
    recorded.update(zip(first, workers.map(_record, [(w, dict(k), cfg) for w, k in first])))
    again = []
    for item, src in rest:
        r = recorded[src]
        p = None if isinstance(r, str) else patched(r, immediates(src[0]), immediates(item[0]))
        if p is None:
            again.append(item)
        else:
            recorded[item] = p
    recorded.update(zip(again, workers.map(_record, [(w, dict(k), cfg) for w, k in again])))


def _fusions(qg: Graph, shapes: Mapping[str, tuple[int, ...]], cfg: Config,
             wanted: Mapping[str, Any], workers: Workers
             ) -> list[tuple[fusion_pass.Fusion, VtaLayer, Choice]]:
    """The residual adds to fuse (:func:`vta.compiler.graph.fuse.candidates` of the layers
    that have knobs, ``wanted``): each fused layer with its layer's knobs (shrunk where the
    extra operand's tiles do not fit them: :func:`_fused_choice`), timed by vta.sim.perf in
    the workers;
    per add the one that saves most against the layer's and the add's cycles together, if any
    (:func:`vta.compiler.graph.fuse.choose`)."""
    ok = [k for k, w in wanted.items() if not isinstance(w, str)]
    jobs = []
    for f in fusion_pass.candidates(qg, ok):
        try:
            layer = plan_node(f.node, shapes, qg.params, cfg)
        except VTAError:
            continue
        jobs.append((f, layer, wanted[f.layer][1], wanted[f.layer][2] + wanted[f.add][2]))
    timed = workers.map(_fused_choice, [(replace(layer, node=""), knobs, cfg)
                                        for _, layer, knobs, _ in jobs])
    found = {f.node.name: (replace(layer, node=""), ch)
             for (f, layer, _, _), ch in zip(jobs, timed) if not isinstance(ch, str)}
    keep = fusion_pass.choose([(f, both - found[f.node.name][1].cycles)
                               for f, _, _, both in jobs if f.node.name in found])
    return [(f, *found[f.node.name]) for f in keep]


def _fused_choice(task: tuple[VtaLayer, dict[str, int], Config]) -> Choice | str:
    """A worker's job: a fused layer's knobs and cycles (its unfused layer's ``knobs``, shrunk
    where the extra operand's tiles do not fit them: the fastest of
    :func:`vta.compiler.topi.residual.fitted_knobs` on vta.sim.perf; no knob search), or the
    one-line reason it does not lower."""
    layer, knobs, cfg = task
    try:
        fits = fitted_knobs(dict(knobs), lambda k: layer.valid(cfg, k))
        if not fits:
            return "no tiling of its layer's knobs leaves room for the fused add's operand"
        timed = [defaults.given_knobs(repr(layer), k, cfg,
                                      lambda k=k: layer.operator(cfg, k)) for k in fits]
        return min(timed, key=lambda ch: ch.cycles)  # ties: the first
    except VTAError as e:
        return str(e).splitlines()[0]


#: Progress of the default-knob searches: (workloads searched, workloads to search).
Progress = Callable[[int, int], None]


def _knob_key(knobs: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(knobs.items()))


def _default_knobs(works: Sequence[Any], cfg: Config, threads: bool, workers: Workers,
                   known: Mapping[str, Choice], progress: Progress | None
                   ) -> tuple[dict[Any, Choice | str], dict[tuple, Recorded | str]]:
    """The default knobs of each distinct workload (or the one-line reason it has none) and
    the programs the searches recorded, by (workload, knob key). Knobs in the user's cache are
    read, those searched ahead (``known``, by cache key) are written to it; the missing ones
    are searched in the workers, each cache entry once (workloads that
    differ only in their epilogue's immediates share one: the worker that searches it records
    all of their programs), the largest workloads first (the last ones to finish are small,
    so no worker waits long for the other); the results do not depend on that order."""
    choices: dict[Any, Choice | str] = {}
    search: dict[str, list[Any]] = {}  # cache key -> the workloads that read it
    stored: set[str] = set()
    for work in dict.fromkeys(works):
        try:
            key, ch = defaults.probe(lambda w=work: w.default(cfg, threads))
        except VTAError as e:
            choices[work] = str(e).splitlines()[0]
            continue
        if ch is None and key in known:
            ch = known[key]
            if key not in stored:
                defaults.store(key, ch)
                stored.add(key)
        if ch is not None:
            choices[work] = ch
        else:
            search.setdefault(key or str(len(search)), []).append(work)
    recorded: dict[tuple, Recorded | str] = {}
    if progress is not None and search:
        progress(0, len(search))
    groups = sorted(search.values(), key=lambda ws: -ws[0].size())  # stable: ties in order
    found = workers.map(_search, [(ws, cfg, threads) for ws in groups], progress)
    for ws, (ch, recs) in zip(groups, found):
        for work, rec in zip(ws, recs):
            choices[work] = ch
            if not isinstance(ch, str):
                recorded[(work, _knob_key(ch.knobs))] = rec
    return choices, recorded


def _search(task: tuple[list[Any], Config, bool]
            ) -> tuple[Choice | str, list[Recorded | str]]:
    """A worker's job: search the default knobs of workloads that share a cache entry (the
    first one's search writes it) and record each one's program with them (the first one's
    the search has just timed: no second lowering); the choice and each program may be the
    one-line reason it failed."""
    works, cfg, threads = task
    try:
        ch = works[0].default(cfg, threads)
    except VTAError as e:
        return str(e).splitlines()[0], ["" for _ in works]
    return ch, [_record((w, ch.knobs, cfg)) for w in works]


def _search_ahead(og: Graph, cfg: Config, o: CompileOptions, workers: Workers,
                  progress: Progress | None = None
                  ) -> Callable[[], list[tuple[str, Choice] | None]]:
    """Start, in the workers, the default-knob searches the float graph's conv and dense
    layers will most likely need, while the caller quantizes the graph: a knob cache entry
    depends on a layer's shapes and on which requantization steps its epilogue has, not on
    their amounts (:func:`~vta.compiler.topi.defaults.conv2d_default`), so it can be searched
    before the scales are known. The epilogue is expected to be the quantizer's usual one
    (a shift, a fixed-point multiplier and its shift; per channel with ``o.per_channel``; a
    shift alone with ``o.pow2``), and a padded conv of a tensor stored with an offset to read
    it unpadded after a ``QPad`` (:func:`~vta.compiler.graph.offsets.offset_tensors`). The
    searches write nothing: calling the result waits for
    their (cache key, Choice) (None for a layer that does not fit) and the compile uses and
    stores those of the workloads the quantized graph has; a layer the guess missed is
    searched then, as without it. The module is the same either way."""
    try:
        works = _expected_workloads(og, cfg, o)
    except (VTAError, KeyError, TypeError, ValueError, IndexError):
        works = []  # a guess never stops a compile: quantization reports what is wrong
    todo: dict[str, Any] = {}
    for work in dict.fromkeys(works):
        try:
            key, ch = defaults.probe(lambda w=work: w.default(cfg, o.threads))
        except VTAError:
            continue
        if ch is None and key is not None:
            todo.setdefault(key, work)
    if progress is not None and todo:
        progress(0, len(todo))
    return workers.start(_search_unstored, [(w, cfg, o.threads) for w in
                                            sorted(todo.values(), key=lambda w: -w.size())],
                         progress)


def _expected_workloads(og: Graph, cfg: Config, o: CompileOptions
                        ) -> list[VtaLayer | AluLayer]:
    """The workloads (:func:`plan_node`) the float graph's conv and dense layers will most
    likely have once quantized (:func:`_search_ahead`)."""
    float_layers, pow2 = set(o.float_layers), o.pow2
    first = float_first_conv(og) if o.keep_first_float else None
    shapes = infer_shapes(og)
    # tensors stored with an offset: a padded conv of one reads it through a QPad, unpadded
    offset = offset_tensors(og, float_layers | {first}, set(qdq_ranges(og)), not pow2)
    vec = [1, 2] if o.per_channel else None
    epi = {"shift": vec or 1, "mul": 1 if pow2 else vec or 2, "shift2": 0 if pow2 else 1,
           "lo": -128, "hi": 127}
    works = []
    for n in og.nodes:
        acts = [i for i in n.inputs if i and i not in og.params]
        if n.op not in ("Conv", "Dense") or len(acts) != 1 or n.name == first or \
                n.name in float_layers or n.name in o.cpu_layers or "Q" + n.op not in o.vta_ops:
            continue
        q = Node("Q" + n.op, n.name, list(n.inputs), list(n.outputs), {**n.attrs, **epi})
        x = shapes.get(n.inputs[0])
        pads = q.attrs.get("pads")
        if n.inputs[0] in offset and pads and any(pads) and x is not None:
            t, left, b, r = pads
            x = (*x[:2], x[2] + t + b, x[3] + left + r)
            q.attrs["pads"] = [0, 0, 0, 0]
        try:
            works.append(replace(plan_node(q, {n.inputs[0]: x}, og.params, cfg), node=""))
        except (VTAError, KeyError, TypeError, ValueError):
            continue  # not a layer the guess can plan: searched later if the graph has it
    return works


def _search_unstored(task: tuple[Any, Config, bool]) -> tuple[str, Choice] | None:
    """A worker's job: a workload's default knobs, searched without writing the knob cache
    (:func:`_search_ahead`); None when it does not fit."""
    work, cfg, threads = task
    try:
        key, ch = defaults.search_unstored(lambda: work.default(cfg, threads))
    except VTAError:
        return None
    return (key, ch) if key is not None else None


def _record(task: tuple[Any, dict[str, int], Config]) -> Recorded | str:
    """A worker's job: record a workload's program with the given knobs."""
    work, knobs, cfg = task
    try:
        return record_layer(work.operator(cfg, knobs))
    except VTAError as e:
        return str(e).splitlines()[0]


def _preload() -> None:
    """Import what lowering and timing a program need, so that forked workers import
    nothing (each would import it again)."""
    import vta.compiler.build  # noqa: F401  # deferred: preloaded for forked workers
    import vta.compiler.codegen.vta  # noqa: F401  # deferred: preloaded for forked workers
    import vta.compiler.topi.conv_transpose  # noqa: F401  # deferred: preloaded for forked workers
    import vta.compiler.topi.elementwise  # noqa: F401  # deferred: preloaded for forked workers
    import vta.runtime  # noqa: F401  # deferred: preloaded for forked workers
    import vta.sim.perf  # noqa: F401  # deferred: preloaded for forked workers


def _plan(qg: Graph, shapes: Mapping[str, tuple[int, ...]], scales: Mapping[str, float],
          cfg: Config, built: Mapping[str, _Built]) -> MemoryPlan:
    b, blk = cfg.batch, cfg.block
    align = arena_align(cfg)
    sizes = {}
    for t, shp in shapes.items():
        if t in scales and len(shp) >= 2:  # packed as VTA layers read it (layout4)
            sizes[t] = packed_nbytes(layout4(shp), b, blk)
        else:
            sizes[t] = int(np.prod(shp)) * 4 if shp else 4
    for name in built:  # a QMatMul's operands are packed as data and weight tiles
        for t, nbytes in vta_buffers(qg.node(name), shapes, qg.params, cfg).items():
            sizes[t] = max(sizes[t], nbytes)
    consts = {k: max(len(v), 1) for lb in built.values() for k, v in lb.blobs.items()}
    return plan_memory(qg, sizes, consts, align=align)
