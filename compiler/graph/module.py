"""Compiled modules: build (``compile_model``), save to / load from a directory.

A module directory (written atomically: a temporary directory renamed into place) holds:

- ``manifest.json``: format version, config, board, the quantized graph, inputs/outputs (shapes,
  dtypes), quantization (exponent per tensor, per-layer report), partition, fusion groups,
  per-kernel metadata;
- ``params.npz``: the graph's parameters (int8 weights, int32 biases, float params of CPU ops);
- ``const.bin``: the constant region of the DRAM arena (packed weights, biases, micro-ops);
- ``plan.json``: the static memory plan (arena size, offset of every tensor);
- ``kernels/NNN_<layer>.bin``: the instruction stream of each VTA layer, addressed relative to
  the arena base (relocated at load time).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa import Config, MemType, encode_uops

from .errors import ModuleError
from .ir import Graph, Node
from .pack import ceil_div, pack_weight, packed_nbytes
from .passes import fusion_groups, optimize
from .plan import MemoryPlan, plan_memory
from .quantize import QuantInfo, layer_errors, quantize_graph, run_quantized, synthetic_samples
from .vta_lower import (
    Addrs,
    LoweringError,
    best_tiling,
    choose_tiling,
    concat_programs,
    encode_fast,
    group_plan,
    layer_uops,
    lower_conv,
)

FORMAT = "vta-module"
VERSION = 1
VTA_OPS = ("QConv", "QDense")


@dataclass
class Kernel:
    """One VTA layer: its instruction stream and what it computes."""

    node: str
    program: bytes
    macs: int
    gemm_macs: int  #: MACs the GEMM core executes (includes channel padding)
    insns: int
    tiling: dict[str, int]
    inp: str
    out: str

    def meta(self, path: str) -> dict[str, Any]:
        return {"node": self.node, "program": path, "macs": self.macs,
                "gemm_macs": self.gemm_macs, "insns": self.insns, "tiling": self.tiling,
                "input": self.inp, "output": self.out}


@dataclass
class CompiledModule:
    cfg: Config
    graph: Graph  #: the quantized graph (int8 and float ops)
    exps: dict[str, int]
    layers: list[QuantInfo]
    partition: dict[str, str]
    shapes: dict[str, tuple[int, ...]]
    plan: MemoryPlan
    const_image: bytes
    kernels: dict[str, Kernel]
    board: str | None = None
    fusion: list[dict[str, Any]] = field(default_factory=list)
    macs: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    #: LLVM IR of the host kernels (node -> IR text), when the operator compiler built them
    host_ir: dict[str, str] = field(default_factory=dict)
    #: output -> cosine / top-1 of the int8 graph against float on the first calibration input
    agreement: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: layer -> operator-compiler knobs from a tuning log (``vta compile --tuning-log``); such
    #: layers run through vta.compiler.topi with these knobs
    tuned_knobs: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def inputs(self) -> dict[str, Any]:
        return self.graph.inputs

    @property
    def outputs(self) -> list[str]:
        return self.graph.outputs

    # --------------------------------------------------------------------- save
    def save(self, out_dir: str | Path) -> Path:
        """Write the module directory atomically (all or nothing)."""
        from vta.isa.errors import FileError

        out = Path(out_dir)
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise FileError(f"cannot write module {out}: directory {parent} does not exist")
        if out.exists() and not (out / "manifest.json").exists() and any(out.iterdir()):
            raise FileError(f"{out} exists and is not a compiled module; choose another -o")
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        try:
            self._write(tmp)
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=parent))
                os.replace(out, old / "m")
                os.replace(tmp, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return out

    def _write(self, d: Path) -> None:
        (d / "kernels").mkdir()
        kmeta = {}
        for k, (name, kern) in enumerate(self.kernels.items()):
            path = f"kernels/{k:03d}_{_safe(name)}.bin"
            (d / path).write_bytes(kern.program)
            kmeta[name] = kern.meta(path)
        hmeta = []
        if self.host_ir:
            (d / "host").mkdir()
        for k, (name, ir) in enumerate(self.host_ir.items()):
            path = f"host/{k:03d}_{_safe(name)}.ll"
            (d / path).write_text(ir)
            hmeta.append({"node": name, "llvm_ir": path})
        np.savez(d / "params.npz", **self.graph.params)
        (d / "const.bin").write_bytes(self.const_image)
        (d / "plan.json").write_text(json.dumps(self.plan.to_dict(), indent=1) + "\n")
        manifest = {
            "format": FORMAT, "version": VERSION,
            "config": self.cfg.to_dict(), "board": self.board,
            "inputs": {k: v.to_dict() for k, v in self.graph.inputs.items()},
            "outputs": {o: {"shape": list(self.shapes[o]), "dtype": "float32"}
                        for o in self.graph.outputs},
            "graph": self.graph.to_json(),
            "quantization": {"scheme": "int8, power-of-two scales (value = q * 2^-exp)",
                             "exps": self.exps, "layers": [i.to_dict() for i in self.layers],
                             "agreement": self.agreement},
            "partition": self.partition,
            "fusion": self.fusion,
            "shapes": {k: list(v) for k, v in self.shapes.items()},
            "macs": self.macs,
            "memory_plan": "plan.json", "const_image": "const.bin", "params": "params.npz",
            "kernels": kmeta,
            "host_kernels": hmeta,
            "notes": self.notes,
            "tuned_knobs": self.tuned_knobs,
            "compile_seconds": round(self.compile_seconds, 3),
        }
        (d / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def load_module(path: str | Path) -> CompiledModule:
    """Read a module directory written by :meth:`CompiledModule.save`."""
    from vta.isa.errors import ConfigError

    d = Path(path)
    mf = d / "manifest.json"
    if not d.is_dir():
        raise ModuleError(f"{d} is not a compiled module directory (run vta compile first)")
    if not mf.exists():
        raise ModuleError(f"{d} has no manifest.json; it is not a compiled module "
                          f"(vta compile MODEL.onnx -o {d})")
    try:
        m = json.loads(mf.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModuleError(f"{mf} is not valid JSON ({e}); recompile the module") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or m.get("version") != VERSION:
        raise ModuleError(f"{mf} is not a {FORMAT} version {VERSION} manifest; recompile it "
                          f"with this kit")
    try:
        cfg = Config.from_dict(m["config"], source=str(mf))
        with np.load(d / m["params"], allow_pickle=False) as z:
            params = {k: z[k] for k in z.files}
        graph = Graph.from_json(m["graph"], params)
        plan = MemoryPlan.from_dict(json.loads((d / m["memory_plan"]).read_text()))
        const = (d / m["const_image"]).read_bytes()
        kernels = {}
        for name, km in m["kernels"].items():
            kernels[name] = Kernel(name, (d / km["program"]).read_bytes(), km["macs"],
                                   km["gemm_macs"], km["insns"], km["tiling"], km["input"],
                                   km["output"])
        q = m["quantization"]
        layers = [QuantInfo(**i) for i in q["layers"]]
        host_ir = {h["node"]: (d / h["llvm_ir"]).read_text() for h in m.get("host_kernels", [])}
    except ConfigError:
        raise
    except (KeyError, OSError, ValueError, TypeError) as e:
        raise ModuleError(f"module {d} is incomplete or corrupt ({type(e).__name__}: {e}); "
                          f"recompile it") from None
    return CompiledModule(cfg, graph, {k: int(v) for k, v in q["exps"].items()}, layers,
                          m["partition"], {k: tuple(v) for k, v in m["shapes"].items()}, plan,
                          const, kernels, m.get("board"), m.get("fusion", []),
                          m.get("macs", {}), m.get("compile_seconds", 0.0), m.get("notes", []),
                          host_ir, q.get("agreement", {}),
                          {k: dict(v) for k, v in m.get("tuned_knobs", {}).items()})


# ---------------------------------------------------------------------- compile
def node_macs(n: Node, shapes: Mapping[str, tuple[int, ...]],
              params: Mapping[str, np.ndarray]) -> int:
    if n.op in ("Conv", "QConv"):
        w = params[n.inputs[1]].shape
        return int(np.prod(shapes[n.outputs[0]])) * int(np.prod(w[1:]))
    if n.op in ("Dense", "QDense"):
        w = params[n.inputs[1]].shape
        return int(np.prod(shapes[n.outputs[0]])) * int(w[1])
    return 0


def compile_graph(g: Graph, cfg: Config, *, samples: Sequence[Mapping[str, np.ndarray]] = (),
                  float_layers: Iterable[str] = (), cpu_layers: Iterable[str] = (),
                  vta_ops: Iterable[str] = VTA_OPS, keep_first_float: bool = True,
                  board: str | None = None, slots: int | None = None,
                  host: str = "llvm", per_channel: bool = False) -> CompiledModule:
    """Optimize, quantize, partition, plan and lower a float graph. ``slots`` forces single (1)
    or double (2) buffering of the VTA layers; by default each layer picks the faster.
    ``host``: "llvm" stores the LLVM IR of the CPU nodes' kernels, "numpy" none."""
    if host not in ("llvm", "numpy"):
        from .errors import InputError

        raise InputError(f"unknown host kernels {host!r}; use llvm or numpy")
    t0 = time.perf_counter()
    og = optimize(g)
    samples = list(samples) or synthetic_samples(og)
    qr = quantize_graph(og, samples, float_layers=float_layers,
                        keep_first_float=keep_first_float, per_channel=per_channel)
    agree = layer_errors(og, qr, samples[0])
    qg = qr.graph
    env = run_quantized(qg, samples[0], keep=True)
    shapes = {k: tuple(np.shape(v)) for k, v in env.items() if k not in qg.params}
    cpu_layers, vta_ops = set(cpu_layers), set(vta_ops)
    partition: dict[str, str] = {}
    notes: list[str] = []
    geoms = {}
    for n in qg.nodes:
        where = "cpu"
        if n.op in vta_ops and n.op in VTA_OPS and n.name not in cpu_layers:
            try:
                gp = group_plan(cfg, shapes[n.inputs[0]], qg.params[n.inputs[1]].shape,
                                n.attrs)
                choose_tiling(cfg, gp.geom)
                where, geoms[n.name] = "vta", gp
            except LoweringError as e:
                notes.append(f"{n.name}: runs on the CPU (int8): {e}")
        partition[n.name] = where
    # ---------------------------------------------------------- memory plan
    b, blk = cfg.batch, cfg.block
    align = max(256, *(cfg.elem_bytes(t) for t in MemType))
    sizes = {}
    for t, shp in shapes.items():
        if t in qr.exps and len(shp) in (2, 4):
            sizes[t] = packed_nbytes(shp, b, blk)
        else:
            sizes[t] = int(np.prod(shp)) * 4 if shp else 4
    consts: dict[str, int] = {}
    blobs: dict[str, bytes] = {}
    tilings = {}
    for name, gp in geoms.items():
        n = qg.node(name)
        geom = gp.geom
        w = qg.params[n.inputs[1]]
        w4 = w.reshape(*w.shape, 1, 1) if w.ndim == 2 else w
        wp = np.concatenate([pack_weight(sw.astype(np.int8), cfg.block_out, cfg.block_in)
                             .reshape(-1) for sw in gp.slices(w4, cfg)])
        bias = qg.params[n.inputs[2]].astype(np.int32)
        op = gp.ob_total * cfg.block_out
        bp = np.zeros((op // cfg.block_out, b, cfg.block_out), np.int32)
        bp[:, :, :] = np.pad(bias, (0, op - len(bias))).reshape(-1, 1, cfg.block_out)
        blobs[f"{name}.wgt"] = wp.tobytes()
        blobs[f"{name}.bias"] = bp.tobytes()
        if isinstance(n.attrs["shift"], list):  # per-channel shifts: a vector per block
            sv = np.zeros((op // cfg.block_out, b, cfg.block_out), np.int32)
            sh = np.asarray(n.attrs["shift"], np.int32)
            sv[:, :, :] = np.pad(sh, (0, op - len(sh))).reshape(-1, 1, cfg.block_out)
            blobs[f"{name}.shift"] = sv.tobytes()
        for k in (f"{name}.wgt", f"{name}.bias", f"{name}.shift"):
            if k in blobs:
                consts[k] = len(blobs[k])
        tilings[name] = best_tiling(cfg, geom) if slots is None else choose_tiling(cfg, geom,
                                                                                  slots)
        consts[f"{name}.uop"] = 4 * len(layer_uops(cfg, geom, tilings[name])[0])
    plan = plan_memory(qg, sizes, consts, align=align)
    image = bytearray(plan.const_size)
    kernels: dict[str, Kernel] = {}
    for name, gp in geoms.items():
        n = qg.node(name)
        geom = gp.geom
        pb = plan.buffers
        cbg, obg = ceil_div(geom.c, cfg.block_in), ceil_div(geom.o, cfg.block_out)
        wslice = obg * cbg * geom.kh * geom.kw  # WGT elements per group
        parts = []
        for k in range(gp.count):
            addrs = Addrs(inp=pb[n.inputs[0]].offset // cfg.inp_elem_bytes
                          + k * cbg * geom.h * geom.w,
                          wgt=pb[f"{name}.wgt"].offset // cfg.wgt_elem_bytes + k * wslice,
                          bias=pb[f"{name}.bias"].offset // cfg.acc_elem_bytes + k * obg,
                          out=pb[n.outputs[0]].offset // cfg.out_elem_bytes
                          + k * obg * geom.oh * geom.ow,
                          uop=pb[f"{name}.uop"].offset // 4,
                          shift=pb[f"{name}.shift"].offset // cfg.acc_elem_bytes + k * obg
                          if f"{name}.shift" in pb else -1)
            part, uops = lower_conv(cfg, geom, addrs, shift=n.attrs["shift"],
                                    lo=n.attrs["lo"], hi=n.attrs["hi"], tiling=tilings[name],
                                    cb_total=gp.cb_total, ob_total=gp.ob_total)
            parts.append(part)
        insns = concat_programs(parts)
        ub = encode_uops(uops, cfg)
        for key, data in [(k, blobs[k]) for k in (f"{name}.wgt", f"{name}.bias",
                                                  f"{name}.shift") if k in blobs] \
                + [(f"{name}.uop", ub)]:
            off = pb[key].offset
            image[off:off + len(data)] = data
        t = tilings[name]
        gemm_macs = sum(i.iter_out * i.iter_in * (i.uop_end - i.uop_bgn) for i in insns
                        if type(i).__name__ == "GemmInsn" and not i.reset_reg) \
            * cfg.macs_per_cycle
        kernels[name] = Kernel(name, encode_fast(insns, cfg), node_macs(n, shapes, qg.params),
                               gemm_macs,
                               len(insns), t.meta(),
                               n.inputs[0], n.outputs[0])
    macs = {n.name: node_macs(n, shapes, qg.params) for n in qg.nodes}
    fusion = [{"kind": f.kind, "master": f.master, "nodes": f.nodes} for f in fusion_groups(qg)]
    host_ir: dict[str, str] = {}
    if host == "llvm":  # the CPU nodes' LLVM kernels (IR only: `vta run` JIT-compiles it)
        from .host import host_kernel

        dtypes = {k: str(np.asarray(v).dtype) for k, v in env.items()}
        for n in qg.nodes:
            if partition[n.name] == "cpu":
                hk = host_kernel(n, shapes, qg.params, dtypes)
                if hk is not None:
                    host_ir[n.name] = hk.text()
    return CompiledModule(cfg, qg, qr.exps, qr.layers, partition, shapes, plan, bytes(image),
                          kernels, board, fusion, macs, time.perf_counter() - t0, notes,
                          host_ir, agree)
