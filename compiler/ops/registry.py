"""The op registry: every fact about an operator of the graph IR (and of the ONNX ops the
frontend imports) declared once, in one :class:`Op` descriptor.

Every list of ops anywhere in the compiler asks this registry (:func:`names`, :func:`get`)
instead of keeping its own: the float reference, the shape inference, the graph passes, the
quantizer, the partitioner, the lowering onto VTA, the summary, the MAC count and the ONNX
frontend. The built-in ops are declared in :mod:`.table`; the two facts that belong to the
graph level (the ONNX converter and the quantizer's rewrite rule) are attached to their
descriptor by the module that defines them (:func:`attach`). Adding an op is one
:func:`register` call (see docs/ARCHITECTURE.md, "How to add an op").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: Fusion patterns (TVM's): element-wise or data movement, a reduction, a layer whose output
#: an element-wise op can fuse into, and an op nothing fuses with.
INJECTIVE, REDUCTION, OUT_FUSABLE, OPAQUE = ("injective", "reduction", "complex-out-fusable",
                                             "opaque")

#: ``kernel(node, args) -> outputs``: a node of the graph IR (its ``op`` and ``attrs``) and the
#: values of its inputs (numpy arrays, ``None`` for an absent optional input).
Kernel = Callable[[Any, list[Any]], list[Any]]
#: ``rule(node, input_shapes) -> output_shape``.
ShapeRule = Callable[[Any, list[tuple[int, ...]]], tuple[int, ...]]
#: ``rule(node, shapes, params) -> multiply-accumulates``.
MacRule = Callable[[Any, Any, Any], int]


@dataclass(frozen=True)
class Op:
    """One operator: its kernels, shape rule and traits.

    - ``float_kernel``: the float reference (:func:`vta.compiler.graph.reference.run_float`);
      ``int_kernel``: the bit-exact int8 rule (the int8 reference,
      :func:`vta.compiler.graph.int8_executor.run_quantized`, and the specification VTA's
      results are checked against).
    - ``shape``: the output shape from the input shapes (``None``: the float kernel run on
      zeros); ``elementwise`` ops get the broadcast shape.
    - ``elementwise``: the output is the inputs' broadcast, element by element; ``unary``: of
      one input (it commutes with a transpose); ``boolean``: a bool output.
    - ``moves``: only moves values (shape ops, concatenation); ``selecting``: the output values
      are some of its one input's values (max pooling, slices); ``order_keeping``: maps values
      by an increasing function (a graph output reached through it is not clipped by
      calibration); ``index_moving``: an integer input reaching a table's indices through it
      indexes it too.
    - ``int8_passthrough``: runs on int8 tensors at the input's scale when its input is
      quantized; ``clipped``: an int8 op whose output lies in its ``lo``/``hi`` attributes;
      ``conversion``: a float <-> int8 conversion.
    - ``gemm``: runs on VTA's GEMM core (a conv2d or dense template); ``alu_kind``: runs on VTA's
      ALU as this :mod:`vta.compiler.topi.elementwise` op.
    - ``pattern``: the fusion pattern; ``macs``: the multiply-accumulate count rule.
    - ONNX: ``onnx`` the converter (``domain`` its ONNX domain), ``onnx_attrs`` the attributes it
      reads (others are refused), ``named_by_weight`` (an unnamed node takes the name of its
      weight's PyTorch module),
      ``never_fold`` (never evaluated at import), ``integer_inputs`` (takes integer or boolean
      activations), ``view`` (runs on a 1-D network's 4-D views as on its 3-D tensors),
      ``reads_integers`` (reads an integer activation of onnxruntime's QOperator format as it
      is: its shape, or its integers).
    - Checks of a model: ``weights`` (its constants are weights, checked finite),
      ``check_attrs`` (``rule(node, input_shapes)`` -> a problem or None), ``predict_shape``
      (its output shape told before its kernel would allocate it).
    - ``vta_layer``: a float layer that becomes a VTA (GEMM) layer when quantized;
      ``fuses_activation``: a following Relu/Clip fuses into it.
    - ``host``: ``build(node, input_shape, shapes, params)`` -> its LLVM CPU operator
      (:mod:`vta.compiler.topi.cpu`) or None.
    - ``quantize``: the quantizer's rewrite of the float op into int8 ops.
    """

    name: str
    float_kernel: Kernel | None = None
    int_kernel: Kernel | None = None
    shape: ShapeRule | None = None
    elementwise: bool = False
    unary: bool = False
    boolean: bool = False
    moves: bool = False
    selecting: bool = False
    order_keeping: bool = False
    index_moving: bool = False
    int8_passthrough: bool = False
    clipped: bool = False
    conversion: bool = False
    gemm: bool = False
    alu_kind: str | None = None
    pattern: str = OPAQUE
    macs: MacRule | None = None
    onnx: Callable[..., None] | None = None
    domain: str = ""
    onnx_attrs: frozenset[str] | None = None
    named_by_weight: bool = False
    never_fold: bool = False
    integer_inputs: bool = False
    view: bool = False
    reads_integers: bool = False
    weights: bool = False
    fuses_activation: bool = False
    vta_layer: bool = False
    check_attrs: Callable[[Any, list[tuple[int, ...]]], str | None] | None = None
    predict_shape: Callable[[Any, tuple[int, ...]], tuple[int, ...]] | None = None
    host: Callable[..., Any] | None = None
    quantize: Callable[..., None] | None = None

    @property
    def lowered(self) -> bool:
        """Whether the op runs on VTA (the GEMM core or the ALU)."""
        return self.gemm or self.alu_kind is not None

    @property
    def int8_capable(self) -> bool:
        """Whether the quantizer rewrites the op into int8 ops (its own ``quantize`` rule, or
        the same op on int8 for an ``int8_passthrough`` one)."""
        return self.quantize is not None or self.int8_passthrough


@dataclass(frozen=True)
class Call:
    """What a kernel reads of a node: its op and attributes (to run a kernel on values outside
    a graph)."""

    op: str
    attrs: dict[str, Any]


_OPS: dict[str, Op] = {}


def register(op: Op) -> Op:
    """Declare ``op``; a name is declared once."""
    if op.name in _OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    _OPS[op.name] = op
    return op


def unregister(name: str) -> None:
    """Remove the op ``name`` (a test's synthetic op)."""
    del _OPS[name]


def attach(name: str, **facts: Any) -> None:
    """Attach graph-level facts (``onnx``, ``quantize``) to the declared op ``name``."""
    if name not in _OPS:
        raise ValueError(f"op {name!r} is not registered (declare it in vta.compiler.ops.table)")
    _OPS[name] = dataclasses.replace(_OPS[name], **facts)


def get(name: str) -> Op | None:
    """The descriptor of ``name`` (``None``: no such op)."""
    return _OPS.get(name)


def all_ops() -> Iterator[Op]:
    return iter(list(_OPS.values()))


def names(pred: Callable[[Op], Any]) -> frozenset[str]:
    """The names of the ops for which ``pred(op)`` holds (e.g. ``names(lambda o: o.moves)``)."""
    return frozenset(o.name for o in _OPS.values() if pred(o))


def has(name: str, trait: str) -> bool:
    """Whether op ``name`` is declared and its ``trait`` is set (true, or not ``None``)."""
    o = _OPS.get(name)
    v = getattr(o, trait) if o is not None else None
    return v is not None and v is not False


def alu_kind(name: str) -> str | None:
    o = _OPS.get(name)
    return o.alu_kind if o is not None else None


def op_for_alu_kind(kind: str) -> Op:
    """The int8 op that VTA's ALU runs as element-wise op ``kind``."""
    for o in _OPS.values():
        if o.alu_kind == kind:
            return o
    raise KeyError(kind)
