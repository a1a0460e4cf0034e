"""Host (CPU) kernels of a compiled network: LLVM code from the operator compiler.

``vta compile`` (``--host llvm``, the default) builds, for every node that runs on the CPU and
that :func:`host_kernel` knows, a kernel of :mod:`vta.compiler.topi.cpu` and stores its LLVM IR
in the module (``host/*.ll``, a first comment line carrying the kernel's signature). A module
is data, never code: ``vta run`` regenerates each kernel from the module's graph and runs it
only when the stored text is that, byte for byte, and its shapes fit the module's memory plan
(:func:`module_host_kernels`); then it JIT-compiles the IR and calls it in place of the numpy
kernel of the node. ``--host numpy`` (compile or run) keeps the numpy kernels, the reference
the tests compare against.

Agreement with the numpy kernels:

- integer and data-movement kernels (int8 conv with the VTA epilogue, ``QAdd``, ``QLut``
  (int8 GELU, Sigmoid, Tanh, SiLU as a table), ``QSoftmax`` (integer after its float mask's
  one float64 division and ``rint`` per element, as numpy's), ``QLayerNorm`` (integer but
  for one float64 multiplier per row, computed as numpy's), ``QMaxPool``,
  ``QGlobalAveragePool``, ``QPad``, ``MaxPool``) are bit-exact, with the calibrated scales'
  fixed-point multipliers as with ``--pow2-scales``; so are ``Quantize`` and ``Dequantize``
  (float64 arithmetic as numpy's, ``rint`` rounding half to even);
- float reductions (``Conv``, ``Softmax``, ``Tanh``) differ in the last bits: LLVM may
  reassociate sums and fuse multiply-adds (fast-math), and softmax/tanh use a polynomial
  ``exp``; the tests bound the difference (see tests/graph/test_graph_host.py).

Shapes and views (``Flatten``, ``Reshape``, ``Identity``) have no kernel: numpy's reshape is a
view and costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import inf, prod
from typing import Any

import numpy as np
from vta.isa.fileio import user_cache_dir

from .. import ops
from ..codegen.llvm import CpuModule
from ..tir.stmt import Buffer
from ..topi import cpu
from .errors import ModuleError
from .ir import Node

Shape = tuple[int, ...]
Shapes = Mapping[str, tuple[int, ...]]
Params = Mapping[str, np.ndarray]

#: The first line of a stored host kernel's IR: ``; vta-host-kernel {json signature}``.
_HEADER = "; vta-host-kernel "


@dataclass
class HostKernel:
    """An LLVM kernel computing one node: ``k(inputs) -> output`` (the node's inputs, in order;
    absent optional inputs as None)."""

    node: str
    #: function name and ``(name, shape, dtype)`` of every argument, the output last
    name: str
    params: list[tuple[str, tuple[int, ...], str]]
    out_shape: tuple[int, ...]
    ir: str
    #: constant trailing arguments (e.g. per-channel shifts), after the node's inputs
    extra: list[np.ndarray] = field(default_factory=list)
    #: options of the LLVM build (CpuModule's, e.g. ``{"unroll": False}``)
    opts: dict[str, Any] = field(default_factory=dict)
    _module: Any = None
    _fast: Any = None

    def text(self) -> str:
        """The IR as stored in a module: a signature comment line, then the LLVM IR."""
        sig = {"name": self.name, "params": self.params, "out_shape": self.out_shape,
               "extra": [[a.tolist(), str(a.dtype)] for a in self.extra], "opts": self.opts}
        return _HEADER + json.dumps(sig) + "\n" + self.ir

    @property
    def module(self) -> Any:
        if self._module is None:
            bufs = [Buffer(n, tuple(s), d) for n, s, d in self.params]

            self._module = CpuModule.from_ir(self.ir, self.name, bufs, [len(bufs) - 1],
                                             object_cache=user_cache_dir("host-kernels"),
                                             **self.opts)
        return self._module

    def __call__(self, inputs: list[np.ndarray | None]) -> np.ndarray:
        if self._module is None or self._fast is None:
            self._fast = (self.module.flat_entry, np.dtype(self.params[-1][2]),
                          len(self.params) - 1 - len(self.extra))
        fast, odt, nin = self._fast
        out = np.empty(self.out_shape, odt)
        # the native entry checks each array (exact ndarray, dtype, element count, layout)
        if fast is not None and not self.extra and len(inputs) == nin \
                and fast(*inputs, out) == 0:
            return out
        args = [x for x in inputs if x is not None] + self.extra
        if fast is not None and len(args) == nin + len(self.extra) and fast(*args, out) == 0:
            return out
        if len(args) != len(self.params) - 1 or \
                any(np.size(a) != prod(s) for a, (_, s, _) in zip(args, self.params)):
            want = [list(s) for _, s, _ in self.params[:-1]]
            got = [list(np.shape(a)) for a in args]
            raise ModuleError(f"host kernel of {self.node!r} takes arrays of shapes {want}, "
                              f"not {got}: the module's shapes are not its graph's; recompile "
                              "the module")
        conv = [np.ascontiguousarray(a, dtype=d).reshape(s)
                for a, (_, s, d) in zip(args, self.params)]
        self.module(*conv, out.reshape(self.params[-1][1]))
        return out


def module_host_kernels(nodes: Iterable[Node], shapes: Mapping[str, tuple[int, ...]],
                        params: Mapping[str, np.ndarray], partition: Mapping[str, str],
                        stored: Mapping[str, str]) -> dict[str, HostKernel]:
    """The host kernels of a module, regenerated from its graph (``nodes``, ``shapes``,
    ``params``, ``partition``) before anything is JIT-compiled: each ``stored`` IR text (node
    -> the module's ``.ll``) must be byte for byte what :func:`host_kernel` emits for a CPU
    node of the graph. Anything else is a one-line ModuleError saying to recompile (a module
    is data: no code of its own runs). A kernel checks the arrays it is given against its
    arguments' shapes when called (:meth:`HostKernel.__call__`)."""
    by_name = {n.name: n for n in nodes}
    out = {}
    for name, text in stored.items():
        n = by_name.get(name)
        if n is None or partition.get(name) != "cpu":
            raise ModuleError(f"host kernel {name!r} is for no CPU layer of the module's graph; "
                              "recompile the module")
        try:
            hk = host_kernel(n, shapes, params)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            hk = None  # a graph this kit would not have emitted
        if hk is None or hk.text() != text:
            raise ModuleError(f"host kernel of {name!r} is not the LLVM IR this kit emits for "
                              "the module's graph; recompile the module")
        out[name] = hk
    return out


def _symmetric(pads: list[int]) -> tuple[int, int] | None:
    t, left, b, r = pads
    return (t, left) if (t, left) == (b, r) else None


def _conv(n: Node, xs: tuple[int, ...], params: Mapping[str, np.ndarray]) -> Any:
    a = n.attrs
    pad = _symmetric(a["pads"])
    if pad is None or a["dilations"] != [1, 1] or a.get("input_strides", [1, 1]) != [1, 1]:
        return None  # a transposed conv's equivalent conv on the CPU: the numpy kernel
    w = params[n.inputs[1]]
    bias = len(n.inputs) > 2 and bool(n.inputs[2])
    if n.op == "Conv":
        act = a.get("activation")
        if act and (act != "relu" or a.get("act_max") is not None):
            return None
        return cpu.conv2d(xs, w.shape, tuple(a["strides"]), pad, bias=bias, relu=bool(act),
                          groups=a["group"])
    shift, mul, shift2 = a["shift"], a.get("mul", 1), a.get("shift2", 0)
    shifts = shift if isinstance(shift, list) else [shift]
    if max(abs(s) for s in shifts) >= 32 or not 0 <= shift2 < 32:
        return None  # beyond an int32 shift: the numpy kernel
    return cpu.conv2d(xs, w.shape, tuple(a["strides"]), pad, dtype="int8", bias=bias,
                      groups=a["group"], requant=(shift, a["lo"], a["hi"], mul, shift2))


def _pool(n: Node, xs: tuple[int, ...], dtype: str) -> Any:
    a = n.attrs
    pad = _symmetric(a["pads"])
    if pad is None or len(xs) != 4:
        return None
    return cpu.max_pool2d(xs, a["kernel_shape"], a["strides"], pad, dtype=dtype)


def _qpad(n: Node, xs: tuple[int, ...]) -> Any:
    """A constant int8 pad of H and W only (what quantize puts before a padded conv of an
    offset tensor); None for other pads."""
    p = n.attrs["pads"]
    if len(xs) != 4 or n.attrs["mode"] != "constant" or any(p[:2] + p[4:6]) or min(p) < 0:
        return None
    return cpu.pad2d(xs, [p[2], p[3], p[6], p[7]], n.attrs["qvalue"])


def _scalar(v: Any) -> bool:
    """``v`` is one positive finite number (a per-tensor scale)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < inf


def _global_avg(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    return cpu.global_avg_pool2d(xs) if len(xs) == 4 else None


def _qglobal_avg(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    a = n.attrs
    return cpu.qglobal_avg_pool2d(xs, a["mul"], a["shift"]) \
        if len(xs) == 4 and 0 <= a["shift"] < 40 else None


def _quantize(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    a = n.attrs
    return cpu.quantize(xs, a["scale"], a.get("offset", 0)) if _scalar(a["scale"]) else None


def _dequantize(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    a = n.attrs
    return cpu.dequantize(xs, a["scale"]) \
        if _scalar(a["scale"]) and not a.get("offset") else None


def _qadd(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    a = n.attrs
    return cpu.qadd(xs, a["mul_a"], a["mul_b"], a["shift"], a["lo"], a["hi"]) \
        if shapes.get(n.inputs[1]) == xs and a["shift"] < 32 else None


def _dense(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    return cpu.dense(xs[0], params[n.inputs[1]].shape[1], params[n.inputs[1]].shape[0],
                        bias=len(n.inputs) > 2) \
        if len(xs) == 2 and not n.attrs.get("activation") else None


def _softmax(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    a = n.attrs
    return cpu.softmax(xs) if not a.get("legacy") and a["axis"] in (-1, len(xs) - 1) \
        else None


def _qsoftmax(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    """The int8 softmax; its bias (a mask) when its shape, leading 1s dropped, is the
    scores' trailing axes (a mask over heads or batch takes the numpy kernel)."""
    a = n.attrs
    bias = None
    if len(n.inputs) > 1:
        bias = tuple(shapes.get(n.inputs[1], np.shape(params.get(n.inputs[1]))))
        core = bias[next((k for k, d in enumerate(bias) if d != 1), len(bias)):]
        if len(core) > len(xs) or xs[len(xs) - len(core):] != core or not core:
            return None
    return cpu.qsoftmax(xs, len(a["table"]), a["scale"], a["mul"], a["shift"], bias)


ops.attach("Conv", host=lambda n, xs, shapes, params: _conv(n, xs, params))
ops.attach("QConv", host=lambda n, xs, shapes, params: _conv(n, xs, params))
ops.attach("MaxPool", host=lambda n, xs, shapes, params: _pool(n, xs, "float32"))
ops.attach("QMaxPool", host=lambda n, xs, shapes, params: _pool(n, xs, "int8"))
ops.attach("GlobalAveragePool", host=_global_avg)
ops.attach("QGlobalAveragePool", host=_qglobal_avg)
ops.attach("Quantize", host=_quantize)
ops.attach("Dequantize", host=_dequantize)
ops.attach("QAdd", host=_qadd)
ops.attach("Dense", host=_dense)
ops.attach("Softmax", host=_softmax)
ops.attach("Tanh", host=lambda n, xs, shapes, params: cpu.tanh(xs))
ops.attach("QPad", host=lambda n, xs, shapes, params: _qpad(n, xs))
ops.attach("QSoftmax", host=_qsoftmax)
ops.attach("QLayerNorm", host=lambda n, xs, shapes, params: cpu.qlayernorm(xs, n.attrs["eps_c2"]))
ops.attach("QLut", host=lambda n, xs, shapes, params: cpu.lut(xs)
           if len(n.attrs["table"]) == 256 else None)


def _build(n: Node, xs: Shape, shapes: Shapes, params: Params) -> Any:
    """The topi.cpu operator of node ``n`` (input shape ``xs``: its op's ``host`` builder in
    the registry), or None."""
    desc = ops.get(n.op)
    return desc.host(n, xs, shapes, params) if desc is not None and desc.host else None


def host_kernel(n: Node, shapes: Mapping[str, tuple[int, ...]],
                params: Mapping[str, np.ndarray]) -> HostKernel | None:
    """The LLVM kernel of node ``n`` (its IR lowered, not yet JIT-compiled), or None when the
    operator compiler has none for it (the node then runs its numpy kernel)."""
    xs = shapes.get(n.inputs[0]) if n.inputs else None
    if xs is None or n.inputs[0] in params:
        return None
    op = _build(n, tuple(xs), shapes, params)
    if op is None:
        return None
    extra = []  # per-channel amounts of the int8 conv epilogue, in cpu._requant's order
    if n.op == "QConv":
        extra = [np.asarray(n.attrs[k], np.int32) for k in ("shift", "mul")
                 if isinstance(n.attrs.get(k), list)]
    if n.op == "QLut":  # the table, after the input
        extra = [np.asarray(n.attrs["table"], np.int8)]
    if n.op == "QSoftmax":  # the exp table, after the scores and bias
        extra = [np.asarray(n.attrs["table"], np.int32)]
    out_shape = tuple(shapes.get(n.outputs[0], op.out_shape))
    if prod(out_shape) != prod(op.out_shape):
        return None
    return HostKernel(n.name, op.name, op.params, out_shape, op.llvm_ir, extra,
                      dict(op.build_opts or {}))
