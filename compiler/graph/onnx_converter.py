"""The ONNX converter: ONNX nodes -> IR nodes, one node at a time, through each op's converter in
the registry (:mod:`vta.compiler.ops`), folding constants and tracking static shapes on the way;
the converters themselves live per op family (:mod:`.onnx_nn`, :mod:`.onnx_elementwise`,
:mod:`.onnx_shape`, :mod:`.onnx_qdq`, :mod:`.onnx_qoperator`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from vta.isa.errors import VTAError

from .. import ops
from .errors import ModelError, UnsupportedOpError
from .ir import Node, TensorInfo
from .onnx_qdq_values import dequantize
from .reference import output_dtype
from .validate import check_folded_size, checked_shape

#: Node names the dynamo exporter generates (``node_Conv_109``): a layer with a weight named
#: ``<module path>.weight`` takes the module path instead, as the TorchScript exporter's names
#: (``/layer1/layer1.0/conv1/Conv``) carry it.
_GENERATED_NAME = re.compile(r"node_\w+")


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def canonical(a: Any) -> np.ndarray:
    """Float tensors as float32 (the IR's float type); integers and booleans as they are."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and a.dtype != np.float32:
        a = a.astype(np.float32)
    return a


class Converter:
    """ONNX nodes -> IR nodes, folding constants and tracking static shapes on the way."""

    def __init__(self, params: dict[str, np.ndarray], inputs: dict[str, TensorInfo],
                 opset: int, source: str):
        self.params, self.opset, self.source = params, opset, source
        self.shapes: dict[str, tuple[int, ...]] = {k: v.shape for k, v in inputs.items()}
        #: dtypes of the activations that are not float32 (integer and boolean inputs, masks)
        self.dtypes: dict[str, str] = {k: v.dtype for k, v in inputs.items()}
        self.alias: dict[str, str] = {}  # Identity-like outputs -> the tensor they forward
        self.nodes: list[Node] = []
        self.names: set[str] = set()
        #: QuantizeLinear outputs awaiting their DequantizeLinear: tensor -> (input, node)
        self.quantized: dict[str, tuple[str, dict[str, Any]]] = {}
        self.live: set[str] = set()  # tensors the graph outputs depend on
        #: 1-D layers run as 2-D ones of height 1: a [N, C, L] tensor -> the [N, C, 1, L]
        #: tensor holding its values (see :meth:`as2d`)
        self.view2d: dict[str, str] = {}
        #: QOperator models: an integer activation -> the float tensor of its dequantized
        #: values (see :mod:`.onnx_qoperator`)
        self.qvalues: dict[str, str] = {}

    # ------------------------------------------------------------------ helpers
    def extra_outputs_used(self, outs: list[str]) -> bool:
        """Whether an output after the first (a mask, statistics, indices) is used."""
        return any(o in self.live for o in outs[1:])

    def fail(self, op: str, name: str, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{self.source}: node {name!r} ({op}): {what}")

    def const(self, op: str, name: str, tensor: str, what: str) -> np.ndarray | None:
        """The constant value of input ``tensor`` (None for an omitted optional input)."""
        if not tensor:
            return None
        if tensor not in self.params:
            raise self.fail(op, name, f"{what} (input {tensor!r}) must be a constant "
                                      f"(an initializer or computed from constants)")
        return self.params[tensor]

    def shape(self, tensor: str) -> tuple[int, ...]:
        if tensor in self.params:
            return tuple(self.params[tensor].shape)
        return self.shapes[self.qvalues.get(tensor, tensor)]

    def dtype(self, tensor: str) -> str:
        if tensor in self.params:
            return str(self.params[tensor].dtype)
        return self.dtypes.get(self.qvalues.get(tensor, tensor), "float32")

    def emit(self, op: str, name: str, ins: list[str], outs: list[str], **attrs: Any) -> None:
        n = Node(op, name, ins, outs, attrs)
        self.nodes.append(n)
        self.shapes[outs[0]] = checked_shape(n, [self.shape(i) if i else None for i in ins],
                                             self.params, self.source)
        self.dtypes[outs[0]] = output_dtype(n, [self.dtype(i) if i else None for i in ins])

    def forward(self, src: str, dst: str) -> None:
        """``dst`` is ``src`` (Identity, Dropout, float Cast)."""
        if src in self.params:
            self.params[dst] = self.params[src]
        else:
            self.alias[dst] = self.alias.get(src, src)
            self.dtypes[dst] = self.dtype(src)

    def spatial(self, op: str, name: str, attrs: dict[str, Any], kernel: list[int],
                x: str) -> tuple[list[int], list[int], list[int]]:
        """strides, pads ``[top, left, bottom, right]`` and dilations of a 2-D window op."""
        if len(kernel) != 2:
            raise self.fail(op, name, f"only 2-D operators are supported (kernel {kernel})")
        strides = [int(v) for v in attrs.get("strides", [1, 1])]
        dil = [int(v) for v in attrs.get("dilations", [1, 1])]
        auto = attrs.get("auto_pad", "NOTSET")
        if auto == "NOTSET":
            return strides, [int(v) for v in attrs.get("pads", [0, 0, 0, 0])], dil
        if auto == "VALID":
            return strides, [0, 0, 0, 0], dil
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            raise self.fail(op, name, f"auto_pad={auto} is not supported")
        begin, end = [], []
        for size, k, s, d in zip(self.shape(x)[2:], kernel, strides, dil):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return strides, begin + end, dil

    def as2d(self, x: str) -> str:
        """The [N, C, 1, L] tensor of a 1-D layer's [N, C, L] input ``x``: a Conv1d runs as a
        Conv2d of height 1, and the ops between two of them (activations, pooling, residual
        adds, :func:`view_op`) run on that 4-D tensor too, so the 2-D passes (fusion,
        folding) and VTA see one 2-D network; a 3-D tensor is reshaped only where another op
        reads it (the reshapes nothing reads are dropped with the unused nodes)."""
        if x not in self.view2d:
            n, ch, length = self.shape(x)
            self.view2d[x] = f"{x}.as2d"
            static_reshape(self, f"{x}.to2d", x, self.view2d[x], [n, ch, 1, length])
        return self.view2d[x]

    def from2d(self, name: str, x2d: str, out: str) -> None:
        """``out`` is the 3-D tensor of the [N, C, 1, L] tensor ``x2d``."""
        n, ch, _, length = self.shape(x2d)
        static_reshape(self, f"{name}.to1d", x2d, out, [n, ch, length])
        self.view2d[out] = x2d

    def emit_viewed(self, op: str, name: str, ins: list[str], out: str, **attrs: Any) -> None:
        """Emit an element-wise IR op of activations (and no constant) on their 4-D views
        when they all have one of one shape (inside a 1-D network), else as it is."""
        if ins and all(i in self.view2d for i in ins) and \
                len({self.shape(i) for i in ins}) == 1:
            self.emit(op, name, [self.view2d[i] for i in ins], [f"{out}.as2d"], **attrs)
            self.from2d(name, f"{out}.as2d", out)
        else:
            self.emit(op, name, ins, [out], **attrs)

    def call(self, converter: Callable[..., None], op: str, name: str, ins: list[str],
             outs: list[str], attrs: dict[str, Any]) -> None:
        """Run the converter of ``op``, on the 4-D views of a 1-D network's tensors where
        :meth:`viewed` says so."""
        viewed = self.viewed(op, ins)
        if viewed is None:
            converter(self, name, ins, outs, attrs)
        else:
            converter(self, name, viewed, [f"{outs[0]}.as2d", *outs[1:]], attrs)
            self.from2d(name, f"{outs[0]}.as2d", outs[0])

    def viewed(self, op: str, ins: list[str]) -> list[str] | None:
        """The inputs of an op that runs on the 4-D tensors of 1-D layers' tensors (its
        activation inputs have them), else None."""
        if view_op(op) and ins and ins[0] in self.view2d:
            return [self.view2d[ins[0]], *ins[1:]]
        if view_binary(op) and len(ins) == 2 and all(i in self.view2d for i in ins) \
                and self.shape(ins[0]) == self.shape(ins[1]):
            return [self.view2d[i] for i in ins]
        return None

    def axis(self, a: int, rank: int) -> int:
        return a + rank if a < 0 else a

    # --------------------------------------------------------------- conversion
    def convert(self, onode: Any, k: int) -> None:
        # deferred: onnx is a heavy import, made only when a model is read
        from onnx import helper

        op = onode.op_type
        name = onode.name or f"{op}_{k}"
        if _GENERATED_NAME.fullmatch(name) and ops.has(op, "named_by_weight") \
                and len(onode.input) > 1 and \
                onode.input[1].endswith(".weight"):
            name = onode.input[1][:-len(".weight")]  # the PyTorch module's path
        while name in self.names:
            name = f"{name}_{k}"
        self.names.add(name)
        desc = ops.get(op)
        microsoft = onode.domain == "com.microsoft" and desc is not None \
            and desc.domain == "com.microsoft" and desc.onnx is not None
        if not microsoft and onode.domain not in ("", "ai.onnx"):
            raise UnsupportedOpError(
                f"{self.source}: node {name!r} has op type {onode.domain}::{op}; only the "
                f"default ONNX domain (and onnxruntime's com.microsoft QLinear ops) is "
                f"supported")
        ins = [self.alias.get(i, i) for i in onode.input]
        outs = list(onode.output)
        if all(not i or i in self.params for i in ins) and not ops.has(op, "never_fold") and \
                not microsoft:
            self.fold(onode, name, ins)
            return
        if desc is None or desc.onnx is None or (desc.domain != "" and not microsoft):
            raise UnsupportedOpError(
                f"{self.source}: node {name!r} has unsupported op type {op} (on a non-constant "
                f"input); supported: {supported()}")
        attrs = {a.name: helper.get_attribute_value(a) for a in onode.attribute}
        allowed = desc.onnx_attrs
        for key in attrs:
            if allowed is not None and key not in allowed:
                raise self.fail(op, name, f"attribute {key!r} is not supported (supported: "
                                          f"{', '.join(sorted(allowed)) or 'none'})")
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        try:
            if moves_values(op, attrs) and ins and ins[0] in self.qvalues:
                # on the float values of a QOperator model's integer activations
                self.call(desc.onnx, op, name, [self.qvalues.get(i, i) for i in ins],
                          [f"{o}.dq" for o in outs], attrs)
                self.qvalues.update((o, f"{o}.dq") for o in outs if o)
            else:
                check_float_inputs(self, op, name, ins)
                self.check_integer_inputs(op, name, ins)
                self.call(desc.onnx, op, name, ins, outs, attrs)
        except VTAError:
            raise
        except Exception as e:  # noqa: BLE001 - any converter failure is one line
            raise ModelError(f"{self.source}: node {name!r} ({op}) cannot be imported: "
                             f"{type(e).__name__}: {first_line(e)}") from None

    def check_integer_inputs(self, op: str, name: str, ins: list[str]) -> None:
        """Integer and boolean activations (ids, masks) reach only the ops that take them:
        a one-line UnsupportedOpError otherwise (the kit's arithmetic is float32)."""
        if ops.has(op, "integer_inputs"):
            return
        for i in ins:
            if i and i not in self.params and self.dtype(i) != "float32":
                raise self.fail(op, name, f"input {i!r} is {self.dtype(i)}; integer and "
                                          f"boolean tensors (ids, masks) reach only "
                                          f"comparisons, logic, Where, Cast, Gather and "
                                          f"shape ops")

    def fold(self, onode: Any, name: str, ins: list[str]) -> None:
        """Evaluate a node of constant inputs with ONNX's reference implementation."""
        # deferred: onnx is a heavy import, made only when a model is read
        import onnx
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        if onode.op_type in ("Identity", "Dropout") and ins and ins[0]:
            self.forward(ins[0], onode.output[0])
            return
        if onode.op_type == "DequantizeLinear":  # onnx.reference has it from opset 19 only
            self.params[onode.output[0]] = dequantize(onode, [self.params[i] if i else None
                                                               for i in ins])
            return
        check_folded_size(onode.op_type, name, [self.params[i] if i else None for i in ins],
                          self.source)
        feeds = {orig: self.params[i] for orig, i in zip(onode.input, ins) if orig}
        g = helper.make_graph([onode], "fold", [onnx.ValueInfoProto(name=k) for k in feeds],
                              [onnx.ValueInfoProto(name=o) for o in onode.output if o])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            vals = ReferenceEvaluator(m).run(None, feeds)
        except Exception as e:  # noqa: BLE001 - whatever the reference implementation raises
            raise ModelError(f"{self.source}: node {name!r} ({onode.op_type}) of constant "
                             f"inputs cannot be evaluated: {first_line(e)}") from None
        for o, v in zip([o for o in onode.output if o], vals):
            self.params[o] = canonical(v)

    def bind_outputs(self, outputs: list[str]) -> None:
        """A graph output that only forwards another tensor gets an Identity producing it."""
        for o in outputs:
            if o in self.alias:
                self.emit("Identity", f"{o}.identity", [self.alias[o]], [o])


# ----------------------------------------------------------------------- converters
Ins = list[str]


Attrs = dict[str, Any]


def static_reshape(c: Converter, name: str, x: str, out: str, shape: list[int]) -> None:
    c.emit("Reshape", name, [x], [out], shape=[int(v) for v in shape], allowzero=0)


def converts(name: str, fn: Callable[..., None]) -> None:
    ops.attach(name, onnx=fn)


def view_op(op: str) -> bool:
    """An op of one activation input (the first; the others scalars or, for
    BatchNormalization, per-channel constants) that runs on the 4-D tensors of a 1-D network
    as it would on its 3-D ones (:meth:`Converter.as2d`)."""
    o = ops.get(op)
    return o is not None and o.view and not view_binary(op)


def view_binary(op: str) -> bool:
    """An element-wise op of two activations of one shape that does the same."""
    o = ops.get(op)
    return o is not None and o.view and o.elementwise and not o.unary


def supported() -> str:
    """The ops imported on activations, for the error message (any standard op is also
    evaluated on constants)."""
    default = sorted(o.name for o in ops.all_ops() if o.onnx and not o.domain)
    ms = sorted(f"{o.domain}::{o.name}" for o in ops.all_ops() if o.onnx and o.domain)
    return ", ".join([*default, *ms])


def moves_values(op: str, attrs: dict[str, Any]) -> bool:
    """Whether standard op ``op`` only moves or selects its input's values (the registry's
    ``moves`` and ``selecting`` ops; nearest Resize too): on integer activations it runs on the
    float values those stand for (its outputs stand for the moved values at the same
    scale)."""
    return ops.has(op, "moves") or ops.has(op, "selecting") or (op in ("Resize", "Upsample")
                                and attrs.get("mode", "nearest") == "nearest")


def check_float_inputs(c: Any, op: str, name: str, ins: list[str]) -> None:
    """A standard op that computes on values reads float tensors: an integer activation of
    the QOperator format is an error naming it (Shape and Size read only its shape, a
    DequantizeLinear its values, the QOperator ops their integers)."""
    if ops.has(op, "reads_integers"):
        return
    for x in ins:
        if x in c.qvalues:
            raise c.fail(op, name, f"input {x!r} is an integer activation (onnxruntime's "
                                   f"QOperator format), which {op} cannot take here; quantize "
                                   f"the model with quant_format=QuantFormat.QDQ instead")
