"""VTA layers of a quantized graph through the operator compiler (vta.compiler.topi).

A ``QConv`` (plain, grouped over whole channel blocks, or depthwise as block-diagonal group
convs, as TVM's VTA ran MobileNet; a transposed conv's equivalent conv, with ``input_strides``,
as the conv2d_transpose template of :mod:`vta.compiler.topi.conv_transpose`) or ``QDense``
becomes a :class:`VtaLayer`: its workload in
packed units and its epilogue (bias preloaded into the accumulator by a LOAD ACC, shift right by
one amount or a per-channel vector, the fixed-point multiplier (one or a per-channel vector,
then a rounding ADD and a shift), clip; each one ALU pass). :meth:`VtaLayer.operator` builds
the topi template with knobs (te compute -> schedule); :func:`record_layer` runs the tir pass
pipeline and VTA code generation in record mode; :func:`place` rebases the recorded program onto
the module's memory plan. An int8 element-wise node (``QAdd``, ``QClip``, ``QLeakyRelu``,
``QHardSigmoid``, ``QHardSwish``) becomes an :class:`AluLayer` of the
:mod:`vta.compiler.topi.elementwise` template (its inputs widened by an identity GEMM, its
rule on the ALU). A layer that does not fit the configuration raises
:class:`LayerError` and runs on the CPU (the reason goes into the module's notes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from vta.isa import Config
from vta.isa.errors import VTAError
from vta.isa.insn import GemmInsn, program_words
from vta.runtime.record import RecordedProgram, Relocation

from .. import ops, topi
from ..build import placed_offsets
from ..errors import CompilerError
from ..topi import Epilogue, defaults
from ..topi import conv_transpose as ct
from ..topi.conv_transpose import Phases, conv2d_transpose_phased, phase_kernel
from ..topi.defaults import recorded_program
from ..topi.elementwise import (
    OPS,
    Spec,
    elementwise_default,
    elementwise_int8,
    identity_weight,
)
from ..topi.pack import (
    ceil_div,
    depthwise_to_group_kernel,
    pack_activation,
    pack_bias,
    pack_weight,
)
from ..topi.residual import Residual
from .ir import Node


class LayerError(CompilerError):
    """A layer that does not fit this VTA configuration (it then runs on the CPU)."""


@dataclass(frozen=True)
class VtaLayer:
    """One VTA layer's template, workload (in tiles) and epilogue."""

    node: str
    template: str  #: "conv2d", "conv2d_transpose" or "dense"
    data: tuple[int, ...]  #: conv (N, CI, H, W) / dense (N, K), in tiles
    kernel: tuple[int, ...]  #: conv (CO, CI/groups, KH, KW) / dense (M, K), in tiles
    #: conv2d_transpose: the input strides (zeros between input pixels) of the equivalent conv
    strides: tuple[int, int] = (1, 1)
    #: conv2d_transpose: the equivalent conv's padding of the zero-interleaved input
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    depthwise: bool = False
    shift: int = 0
    shift_vector: bool = False
    clip: tuple[int, int] = (-128, 127)
    #: the fixed-point multiplier (one, or a per-channel vector) and the shift after it
    mul: int = 1
    mul_vector: bool = False
    shift2: int = 0
    #: extra operands after data and kernel, in the operator's argument order
    vectors: tuple[str, ...] = field(default=("bias",))
    #: a residual add fused into the epilogue (vta.compiler.topi.residual); its other operand
    #: is the node's fourth input, its identity weight the last vector
    residual: Residual | None = None

    def size(self) -> int:
        """Its multiply-accumulates in tiles (what the compile orders its knob searches by)."""
        return math.prod(self.data) * math.prod(self.kernel) // max(self.data[1], 1)

    def requant(self) -> dict[str, Any]:
        return {"shift": self.shift, "clip": self.clip, "shift_vector": self.shift_vector,
                "mul": self.mul, "mul_vector": self.mul_vector, "shift2": self.shift2,
                "residual": self.residual}

    def epilogue(self) -> Any:
        return Epilogue(bias=True, **self.requant())

    def operator(self, cfg: Config, knobs: Mapping[str, int] | None) -> Any:
        """The topi operator (unbuilt); ``knobs=None``: the template's default knobs."""
        kn = dict(knobs) if knobs else None
        if self.template == "conv2d_transpose":
            return conv2d_transpose_phased(self._data6(cfg), self.kernel[0], *self.phases(),
                                           cfg, self.epilogue(), kn)
        if self.template == "dense":
            (n, k), (m, _) = self.data, self.kernel
            return topi.dense_packed((n, k, cfg.batch, cfg.block_in),
                                     (m, k, cfg.block_out, cfg.block_in), config=cfg, bias=True,
                                     knobs=kn, target=None, **self.requant())
        return topi.conv2d_packed((*self.data, cfg.batch, cfg.block_in),
                                  (*self.kernel, cfg.block_out, cfg.block_in), config=cfg,
                                  strides=self.strides, padding=self.padding,
                                  dilation=self.dilation, groups=self.groups, bias=True,
                                  knobs=kn, target=None, **self.requant())

    def valid(self, cfg: Config, knobs: Mapping[str, int]) -> bool:
        """Whether ``knobs`` are a valid schedule of this conv2d or dense layer."""
        from vta.compiler import topi

        kn, res = dict(knobs), self.residual is not None
        if self.template == "dense":
            (n, k), (m, _) = self.data, self.kernel
            return set(kn) == {"tile_b", "tile_co", "tile_ci", "oc_nthread"} and \
                topi.dense_valid(kn, n, k, m, cfg, res)
        return self.template == "conv2d" and set(kn) == set(topi.KNOB_NAMES) and \
            topi.conv2d_valid(kn, self._data6(cfg),
                              (*self.kernel, cfg.block_out, cfg.block_in), self.strides,
                              self.padding, cfg, self.dilation, self.groups, res)

    def default(self, cfg: Config, threads: bool = True) -> Any:
        """The default knobs (vta.compiler.topi.defaults: ranked by vta.sim.perf, cached)."""
        if self.template == "conv2d_transpose":
            py, px = self.phases()
            return ct.default_choice(self._data6(cfg), self.kernel[0], py, px, cfg,
                                     self.epilogue(), threads)
        if self.template == "dense":
            (n, k), (m, _) = self.data, self.kernel
            return defaults.dense_default(n, k, m, cfg, self.epilogue())
        return defaults.conv2d_default(self.data, self.kernel, self.strides, self.padding,
                                       self.dilation, self.groups, cfg, self.epilogue(),
                                       threads=threads)

    def constants(self, cfg: Config, node: Node, params: Mapping[str, np.ndarray]
                  ) -> list[bytes]:
        """The packed weight, bias (and shift, multiplier vectors) in the operator's argument
        order."""
        w = params[node.inputs[1]].astype(np.int8, copy=False)  # no copy: int8 already
        if self.template == "conv2d_transpose":
            # the equivalent conv's flipped (CO, CI, KH, KW) weights -> the transposed conv's
            # (CI, CO, KH, KW) -> every phase's sub-kernel
            wt = w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
            w = np.ascontiguousarray(phase_kernel(wt, *self.phases()).transpose(1, 0, 2, 3))
        if self.template == "dense":
            w = w.reshape(*w.shape, 1, 1)
        if self.depthwise:

            wp = depthwise_to_group_kernel(w, cfg)
        else:
            wp = pack_weight(w, cfg.block_out, cfg.block_in)
        out = [wp.tobytes(), _vector(params[node.inputs[2]], cfg)]
        if self.shift_vector:
            out.append(_vector(np.asarray(node.attrs["shift"]), cfg))
        if self.mul_vector:
            out.append(_vector(np.asarray(node.attrs["mul"]), cfg))
        if self.residual is not None:
            from vta.compiler.topi.elementwise import identity_weight

            out.append(identity_weight(cfg).tobytes())
        return out

    def _data6(self, cfg: Config) -> tuple[int, ...]:
        return (*self.data, cfg.batch, cfg.block_in)

    def phases(self) -> tuple[Any, Any]:
        """conv2d_transpose: the output phases of each dimension (LayerError when the output is
        not a whole number of phase rows)."""
        out = []
        for d in range(2):
            h, k, s = self.data[2 + d], self.kernel[2 + d], self.strides[d]
            lo, hi = self.padding[d], self.padding[2 + d]
            try:
                out.append(Phases.of(h, k, s, k - 1 - lo, (h - 1) * s + 1 + lo + hi - k + 1))
            except VTAError as e:
                raise LayerError(str(e)) from None
        return out[0], out[1]


def _vector(v: np.ndarray, cfg: Config) -> bytes:
    """A per-output-channel int32 vector as (1, O/BLOCK_OUT, BATCH, BLOCK_OUT)."""

    return pack_bias(np.asarray(v).astype(np.int32), cfg).tobytes()


def plan_layer(n: Node, x_shape: Sequence[int], w_shape: Sequence[int], cfg: Config
               ) -> VtaLayer:
    """The VTA layer of a QConv / QDense node, or LayerError saying why it cannot be one."""
    a = n.attrs
    shift, mul = a["shift"], a.get("mul", 1)
    vec, mvec = isinstance(shift, list | tuple), isinstance(mul, list | tuple)
    epi = {"shift": 0 if vec else int(shift), "shift_vector": vec,
           "clip": (int(a["lo"]), int(a["hi"])), "mul": 1 if mvec else int(mul),
           "mul_vector": mvec, "shift2": int(a.get("shift2", 0)),
           "vectors": ("bias",) + (("shift",) if vec else ()) + (("mul",) if mvec else ())}
    res = Residual.of(a.get("residual"))
    if res is not None:  # a fused residual add (vta.compiler.graph.fuse)
        if a.get("input_strides", [1, 1]) != [1, 1]:
            raise LayerError("a transposed convolution has no fused residual add")
        epi.update(residual=res, vectors=(*epi["vectors"], "eye"))
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    if n.op == "QDense":
        return VtaLayer(n.name, "dense", (ceil_div(x_shape[0], b), ceil_div(x_shape[1], bi)),
                        (ceil_div(w_shape[0], bo), ceil_div(w_shape[1], bi)), **epi)
    pads = tuple(int(p) for p in a["pads"])
    if a.get("input_strides", [1, 1]) != [1, 1]:
        return _transposed(n, x_shape, w_shape, pads, cfg, epi)
    if max(pads) > 15:
        raise LayerError(f"padding {max(pads)} exceeds the 4-bit LOAD pad fields")
    nn_, c, h, w = x_shape
    o, cg, kh, kw = w_shape
    grp = int(a.get("group", 1))
    geom = dict(strides=tuple(a["strides"]), padding=pads, dilation=tuple(a["dilations"]))
    nb = ceil_div(nn_, b)
    if grp == 1:
        return VtaLayer(n.name, "conv2d", (nb, ceil_div(c, bi), h, w),
                        (ceil_div(o, bo), ceil_div(c, bi), kh, kw), **geom, **epi)
    blk = cfg.block
    if (c // grp) % bi == 0 and (o // grp) % bo == 0:
        return VtaLayer(n.name, "conv2d", (nb, c // bi, h, w), (o // bo, cg // bi, kh, kw),
                        **geom, groups=grp, **epi)
    if grp == c == o and cg == 1:
        # depthwise: ceil(C/BLOCK) groups of one block-diagonal tile; a partial last block's
        # padded lanes have zero weights, bias, shift and multiplier, so they compute
        # requant(0), which no reader uses (a conv's weights there are zero, unpacking drops it)
        t = ceil_div(c, blk)
        return VtaLayer(n.name, "conv2d", (nb, t, h, w), (t, 1, kh, kw), **geom,
                        groups=t, depthwise=True, **epi)
    raise LayerError(f"{grp} groups of {c // grp} input channels do not split into whole "
                        f"{blk}-channel blocks")


def _transposed(n: Node, x_shape: Sequence[int], w_shape: Sequence[int],
                pads: tuple[int, ...], cfg: Config, epi: dict[str, Any]) -> VtaLayer:
    """A transposed conv (its equivalent conv over the zero-interleaved input)."""
    a = n.attrs
    if int(a.get("group", 1)) != 1 or list(a["dilations"]) != [1, 1]:
        raise LayerError("a grouped or dilated transposed convolution has no VTA template")
    if pads[0] > w_shape[2] - 1 or pads[1] > w_shape[3] - 1:
        raise LayerError("a transposed convolution with negative padding has no VTA template")
    nn_, c, h, w = x_shape
    o, _, kh, kw = w_shape
    b, bi, bo = cfg.batch, cfg.block_in, cfg.block_out
    layer = VtaLayer(n.name, "conv2d_transpose", (ceil_div(nn_, b), ceil_div(c, bi), h, w),
                     (ceil_div(o, bo), ceil_div(c, bi), kh, kw),
                     strides=tuple(a["input_strides"]), padding=pads, **epi)
    layer.phases()  # the output must be whole phase rows
    return layer


@dataclass(frozen=True)
class AluLayer:
    """One element-wise VTA layer: its int8 rule (a topi.elementwise Spec) over ``tiles``
    packed tiles of its input(s)."""

    node: str
    spec: Any  #: vta.compiler.topi.elementwise.Spec
    tiles: int
    template: str = "elementwise"
    vectors: tuple[str, ...] = ()

    def size(self) -> int:
        """Its packed tiles (what the compile orders its knob searches by)."""
        return self.tiles

    def operator(self, cfg: Config, knobs: Mapping[str, int] | None) -> Any:
        return elementwise_int8(self.spec, self.tiles, config=cfg, knobs=knobs, target=None)

    def default(self, cfg: Config, threads: bool = True) -> Any:
        return elementwise_default(self.spec, self.tiles, cfg, threads)

    def constants(self, cfg: Config, node: Node, params: Mapping[str, np.ndarray]
                  ) -> list[bytes]:
        """The identity weight the GEMM widens the inputs with."""
        return [identity_weight(cfg).tobytes()]


def plan_alu(n: Node, shapes: Mapping[str, Sequence[int]], cfg: Config) -> AluLayer:
    """The ALU layer of a quantized element-wise node, or LayerError saying why not."""
    kind = ops.alu_kind(n.op)  # the registry's ALU kind: the template op
    xs = [tuple(shapes[i]) for i in n.inputs]
    if len(set(xs)) != 1 or len(xs[0]) not in (2, 4):
        raise LayerError(f"inputs of shapes {', '.join(map(str, xs))} are not one NCHW or NC "
                         "shape (no broadcasting on the ALU)")
    x4 = (*xs[0], 1, 1)[:4]
    tiles = ceil_div(x4[0], cfg.batch) * ceil_div(x4[1], cfg.block) * x4[2] * x4[3]
    attrs = {k: n.attrs[k] for k in OPS[kind]}
    return AluLayer(n.name, Spec.make(kind, **attrs), tiles)


def plan_node(n: Node, shapes: Mapping[str, Sequence[int]], params: Mapping[str, np.ndarray],
              cfg: Config) -> VtaLayer | AluLayer:
    """The VTA layer of a QConv / QDense (:func:`plan_layer`) or element-wise node."""
    if ops.alu_kind(n.op) is not None:
        return plan_alu(n, shapes, cfg)
    return plan_layer(n, shapes[n.inputs[0]], params[n.inputs[1]].shape, cfg)


# ----------------------------------------------------------------------------- recording
@dataclass
class Recorded:
    """A layer's program recorded against scratch offsets of its operands."""

    rec: RecordedProgram
    offsets: list[int]  #: byte offset of each operand in the scratch arena
    sizes: list[int]  #: bytes of each operand


def record_layer(op: Any) -> Recorded:
    """Lower an operator through the tir pass pipeline and record its VTA program (the
    default-knob search keeps the programs it has just timed: vta.compiler.topi.defaults;
    a recording is not timed: the knobs' cycles come with them)."""
    rec = recorded_program(op)
    sizes = [int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in op.args]
    return Recorded(rec, placed_offsets(sizes, op.cfg)[0], sizes)


def place(r: Recorded, operands: Sequence[int], uop_offset: int) -> bytes:
    """The program with its operands at the given arena byte offsets and its micro-ops at
    ``uop_offset``: every DRAM address relative to the arena's start."""
    relocs = []
    for x in r.rec.relocations:
        if x.kind == "uop":
            relocs.append(Relocation(x.index, "arena", 4, uop_offset // 4 + x.offset))
            continue
        byte = x.offset * x.elem_bytes
        k = next(k for k, (o, s) in enumerate(zip(r.offsets, r.sizes)) if o <= byte < o + s)
        if operands[k] % x.elem_bytes:
            raise LayerError(f"operand {k} at byte {operands[k]} is not aligned to "
                                f"{x.elem_bytes} B")
        relocs.append(Relocation(x.index, "arena", x.elem_bytes,
                                 x.offset + (operands[k] - r.offsets[k]) // x.elem_bytes))
    return RecordedProgram(r.rec.cfg, r.rec.program, relocs).relocate(0)


def gemm_macs(program: bytes, cfg: Config) -> int:
    """MACs the GEMM core executes (channel padding included): the GEMM instructions' fields
    decoded as columns (no instruction objects)."""
    words = program_words(program)
    gemm = words[cfg.layouts.finish.unpack_columns(words)["opcode"] == GemmInsn.opcode]
    c = cfg.layouts.gemm.unpack_columns(gemm)
    macs = c["iter_out"] * c["iter_in"] * (c["uop_end"] - c["uop_bgn"])
    return int(macs[c["reset_reg"] == 0].sum()) * cfg.macs_per_cycle


def packed_input(x: np.ndarray, cfg: Config) -> np.ndarray:
    """A layer's input (NCHW or NC) in the packed layout the programs read."""
    x4 = x.reshape(*x.shape, 1, 1) if x.ndim == 2 else x
    return pack_activation(x4, cfg.batch, cfg.block)


__all__ = ["LayerError", "VtaLayer", "AluLayer", "plan_layer", "plan_alu",
           "plan_node", "Recorded", "record_layer", "place",
           "gemm_macs", "packed_input"]
