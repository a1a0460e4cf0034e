"""ONNX -> graph IR, as ``torch.onnx.export`` (TorchScript and dynamo exporters, opsets 11-21)
writes it.

Conversion walks the nodes in order and keeps, for every tensor, either its constant value or
its static shape (the input shapes are static: ``input_shapes`` gives symbolic dimensions their
sizes, and a symbolic batch dimension not given becomes 1):

- **Constant propagation.** A node whose inputs are all constants (initializers, ``Constant``
  outputs, or values folded before it) is evaluated at import time by ONNX's reference
  implementation (``onnx.reference``, so dtypes and semantics are ONNX's own) and produces no IR
  node. ``Shape``/``Size`` of an activation are constants too, from the static shapes, so the
  exporters' Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains fold into static
  Reshape targets. ``Identity``, ``Dropout`` and float ``Cast`` forward their input (constant or
  not): the exporters share equal weights (batch-norm scales of 1, zero biases) through
  Identity nodes, and a layer sees its weights as constants whichever way they arrive.
- **Shape inference.** Every emitted IR node's output shape comes from
  :func:`.reference.output_shape`; ops that need a shape (Unsqueeze, Squeeze, Slice, ceil-mode
  pooling, ``auto_pad=SAME_*``, a MatMul over a rank-4 activation) resolve it at import.
- **Canonical attributes.** Each op is converted to the IR's canonical form (pads
  ``[top, left, bottom, right]``; ceil-mode pooling as extra end padding; ``ReduceMean``/
  ``ReduceMax`` over H, W as global pooling; ``Split`` as one ``Slice`` per output; Unsqueeze,
  Squeeze and Reshape as a static ``Reshape``; MatMul with a constant 2-D weight as ``Dense``;
  a 1-D Conv/MaxPool/AveragePool as the 2-D one of height 1, see :meth:`_Converter.as2d`).

An op without a converter, on a non-constant input, is an :class:`UnsupportedOpError` of one
line naming the node and the op type; any other failure inside a converter becomes a one-line
:class:`ModelError` naming the node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa.errors import VTAError
from vta.isa.fileio import read_bytes

from .. import ops
from ..ops.kernels import ceil_mode_extra
from .errors import ModelError, UnsupportedOpError
from .ir import Graph, Node, TensorInfo
from .reference import output_dtype
from .validate import check_external_data, check_folded_size, checked_shape

#: Node names the dynamo exporter generates (``node_Conv_109``): a layer with a weight named
#: ``<module path>.weight`` takes the module path instead, as the TorchScript exporter's names
#: (``/layer1/layer1.0/conv1/Conv``) carry it.
_GENERATED_NAME = re.compile(r"node_\w+")
#: ``input_shapes``: graph input name -> its shape; the key ``""`` names a model's only input.
InputShapes = Mapping[str, Sequence[int]]


def load_onnx(path: str | Path, *, input_shapes: InputShapes | None = None) -> Graph:
    """Read an ONNX file into a :class:`Graph` (a one-line ModelError on any problem).
    ``input_shapes`` gives inputs their shapes: sizes for their symbolic dimensions (their
    fixed ones must agree)."""

    p = Path(path)
    if not p.exists():
        raise ModelError(f"model file {p} does not exist")
    if p.is_dir():
        raise ModelError(f"model file {p} is a directory (vta run accepts a compiled module "
                         f"directory; vta compile needs an .onnx file)")
    try:
        model, checked = _read_model(p)
    except VTAError:
        raise
    except Exception as e:  # noqa: BLE001 - protobuf raises several unrelated types
        raise ModelError(f"{p} is not a valid ONNX file ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
    _check(model, checked, str(p))
    return _convert(model, str(p), input_shapes or {})


def _read_model(p: Path) -> tuple[Any, bytes | str]:
    """The model of file ``p`` (as ``onnx.load`` reads it) and what the checker is to read:
    the file's bytes, read once (given the proto, the checker would serialize it again: half a
    second for VGG's 530 MB), or the file's path when tensors are stored in external files
    (which the checker finds beside it)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    data = read_bytes(p, "model file")
    model = onnx.load_model_from_string(data)
    if not any(uses_external_data(t) for t in _all_tensors(model.graph)):
        return model, data
    check_external_data(_all_tensors(model.graph), p.parent, str(p))
    load_external_data_for_model(model, str(p.parent))
    return model, str(p)


def _all_tensors(g: Any) -> Any:
    """The tensors of a GraphProto: initializers, and tensor attributes of its nodes and of
    their subgraphs."""
    yield from g.initializer
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_tensors(sub)


def from_onnx(model: Any, *, source: str = "model",
              input_shapes: InputShapes | None = None) -> Graph:
    """Convert an ``onnx.ModelProto`` (checked first) into a :class:`Graph`."""
    _check(model, model, source)
    return _convert(model, source, input_shapes or {})


def _check(model: Any, checked: Any, source: str) -> None:
    """A one-line ModelError unless ``model`` has a graph and ``checked`` (the model or its
    file) passes ONNX's checker."""
    import onnx

    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{source} contains no graph (is it an ONNX model file?)")
    try:
        onnx.checker.check_model(checked)
    except Exception as e:  # noqa: BLE001 - ValidationError and friends
        raise ModelError(f"{source} is not a valid ONNX model: {_first_line(e)}") from None


def _convert(model: Any, source: str, input_shapes: InputShapes) -> Graph:
    """A checked ``onnx.ModelProto`` -> :class:`Graph`."""
    import onnx
    from onnx import numpy_helper

    if model.functions:  # model-local functions (the dynamo exporter may write them)
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"{source}: its local functions cannot be inlined: "
                             f"{_first_line(e)}") from None
    opset = 1
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            opset = imp.version
    g = model.graph
    params: dict[str, np.ndarray] = {}
    for init in g.initializer:
        params[init.name] = _to_array(numpy_helper, init, source)
    graph_inputs = [vi for vi in g.input if vi.name not in params]
    if not graph_inputs:
        raise ModelError(f"{source} has no (non-constant) graph input")
    given = _given_shapes(input_shapes, [vi.name for vi in graph_inputs], source)
    inputs = {vi.name: _tensor_info(vi, source, given.get(vi.name)) for vi in graph_inputs}
    outputs = [o.name for o in g.output]
    conv = _Converter(params, inputs, opset, source)
    conv.live = _live_tensors(g.node, outputs)
    for k, onode in enumerate(g.node):
        if any(o in conv.live for o in onode.output):  # nodes nothing uses are not imported
            conv.convert(onode, k)
    conv.bind_outputs(outputs)
    graph = Graph(conv.nodes, inputs, outputs, params, name=g.name or Path(source).stem)
    graph.verify()
    return graph.remove_unused()


def _live_tensors(nodes: Any, outputs: list[str]) -> set[str]:
    """The tensors the graph outputs depend on."""
    live = set(outputs)
    for n in reversed(list(nodes)):
        if any(o in live for o in n.output):
            live.update(i for i in n.input if i)
    return live


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _to_array(numpy_helper: Any, t: Any, source: str) -> np.ndarray:
    try:
        a = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{source}: tensor {t.name!r} cannot be read ({e})") from None
    return _canonical(a)


def _canonical(a: Any) -> np.ndarray:
    """Float tensors as float32 (the IR's float type); integers and booleans as they are."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and a.dtype != np.float32:
        a = a.astype(np.float32)
    return a


def _given_shapes(input_shapes: InputShapes, names: list[str],
                  source: str) -> dict[str, tuple[int, ...]]:
    """``input_shapes`` by input name (``""``: the only input), each checked to be positive
    integers and to name a graph input."""
    given = {}
    for name, dims in input_shapes.items():
        if name == "" and len(names) != 1:
            raise ModelError(f"{source} has {len(names)} inputs ({', '.join(names)}): name the "
                             f"input each shape is for (--input-shape NAME=D,D,...; vta run: "
                             f"a .npz input file, an array per input name)")
        key = name or names[0]
        if key not in names:
            raise ModelError(f"{source} has no input named {key!r} (its inputs: "
                             f"{', '.join(names)})")
        if key in given:
            raise ModelError(f"input {key!r} is given two shapes")
        if not dims or any(not isinstance(d, (int, np.integer)) or d < 1 for d in dims):
            raise ModelError(f"input shape {list(dims)} of {key!r}: give positive integer "
                             f"dimensions")
        given[key] = tuple(int(d) for d in dims)
    return given


#: Element types of graph inputs: float32 data, and the integer and boolean inputs of language
#: models (token, position and token-type ids, attention masks), which feed embedding tables,
#: comparisons, Where and Cast on the CPU.
_INPUT_TYPES = {"FLOAT": "float32", "INT64": "int64", "INT32": "int32", "BOOL": "bool"}


def _tensor_info(vi: Any, source: str, given: tuple[int, ...] | None) -> TensorInfo:
    """The input's static shape and dtype: its fixed dimensions, with the symbolic ones from
    ``given`` (whose fixed dimensions must agree), else a symbolic batch dimension as 1."""
    import onnx

    tt = vi.type.tensor_type
    type_name = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else "unknown"
    dtype = _INPUT_TYPES.get(type_name)
    if dtype is None:
        raise UnsupportedOpError(f"{source}: input {vi.name!r} has element type {type_name}; "
                                 f"the supported ones are {', '.join(_INPUT_TYPES)}")
    if not tt.HasField("shape"):
        raise ModelError(f"{source}: input {vi.name!r} has no shape; give the model a static "
                         f"input shape")
    model_dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                  for d in tt.shape.dim]
    if given is not None:
        if len(given) != len(model_dims):
            raise ModelError(f"{source}: input {vi.name!r} has rank {len(model_dims)}; the "
                             f"input shape {list(given)} has {len(given)} dimensions")
        for k, (fixed, size) in enumerate(zip(model_dims, given)):
            if fixed is not None and fixed != size:
                raise ModelError(f"{source}: input {vi.name!r} dimension {k} is {fixed} in "
                                 f"the model, not {size}")
        return TensorInfo(given, dtype)
    dims = []
    for k, (fixed, d) in enumerate(zip(model_dims, tt.shape.dim)):
        if fixed is not None:
            dims.append(fixed)
        elif k == 0:
            dims.append(1)  # a symbolic batch dimension: compile for batch 1
        else:
            raise ModelError(f"{source}: input {vi.name!r} dimension {k} is symbolic "
                             f"({d.dim_param or '?'}); give the input's shape (--input-shape "
                             f"{vi.name}=D,D,...) or export the model with a static shape")
    return TensorInfo(tuple(dims), dtype)


class _Converter:
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
        adds, :func:`_view_op`) run on that 4-D tensor too, so the 2-D passes (fusion,
        folding) and VTA see one 2-D network; a 3-D tensor is reshaped only where another op
        reads it (the reshapes nothing reads are dropped with the unused nodes)."""
        if x not in self.view2d:
            n, ch, length = self.shape(x)
            self.view2d[x] = f"{x}.as2d"
            _static_reshape(self, f"{x}.to2d", x, self.view2d[x], [n, ch, 1, length])
        return self.view2d[x]

    def from2d(self, name: str, x2d: str, out: str) -> None:
        """``out`` is the 3-D tensor of the [N, C, 1, L] tensor ``x2d``."""
        n, ch, _, length = self.shape(x2d)
        _static_reshape(self, f"{name}.to1d", x2d, out, [n, ch, length])
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
        if _view_op(op) and ins and ins[0] in self.view2d:
            return [self.view2d[ins[0]], *ins[1:]]
        if _view_binary(op) and len(ins) == 2 and all(i in self.view2d for i in ins) \
                and self.shape(ins[0]) == self.shape(ins[1]):
            return [self.view2d[i] for i in ins]
        return None

    def axis(self, a: int, rank: int) -> int:
        return a + rank if a < 0 else a

    # --------------------------------------------------------------- conversion
    def convert(self, onode: Any, k: int) -> None:
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
        from . import onnx_qoperator as qop

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
                f"input); supported: {_supported()}")
        attrs = {a.name: helper.get_attribute_value(a) for a in onode.attribute}
        allowed = desc.onnx_attrs
        for key in attrs:
            if allowed is not None and key not in allowed:
                raise self.fail(op, name, f"attribute {key!r} is not supported (supported: "
                                          f"{', '.join(sorted(allowed)) or 'none'})")
        attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
        try:
            if qop.moves_values(op, attrs) and ins and ins[0] in self.qvalues:
                # on the float values of a QOperator model's integer activations
                self.call(desc.onnx, op, name, [self.qvalues.get(i, i) for i in ins],
                          [f"{o}.dq" for o in outs], attrs)
                self.qvalues.update((o, f"{o}.dq") for o in outs if o)
            else:
                qop.check_float_inputs(self, op, name, ins)
                self.check_integer_inputs(op, name, ins)
                self.call(desc.onnx, op, name, ins, outs, attrs)
        except VTAError:
            raise
        except Exception as e:  # noqa: BLE001 - any converter failure is one line
            raise ModelError(f"{self.source}: node {name!r} ({op}) cannot be imported: "
                             f"{type(e).__name__}: {_first_line(e)}") from None

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
        import onnx
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        if onode.op_type in ("Identity", "Dropout") and ins and ins[0]:
            self.forward(ins[0], onode.output[0])
            return
        if onode.op_type == "DequantizeLinear":  # onnx.reference has it from opset 19 only
            self.params[onode.output[0]] = _dequantize(onode, [self.params[i] if i else None
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
                             f"inputs cannot be evaluated: {_first_line(e)}") from None
        for o, v in zip([o for o in onode.output if o], vals):
            self.params[o] = _canonical(v)

    def bind_outputs(self, outputs: list[str]) -> None:
        """A graph output that only forwards another tensor gets an Identity producing it."""
        for o in outputs:
            if o in self.alias:
                self.emit("Identity", f"{o}.identity", [self.alias[o]], [o])


# ----------------------------------------------------------------------- converters
Ins = list[str]
Attrs = dict[str, Any]


def _as_2d(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs,
           conv2d: Callable[..., None]) -> None:
    """A 1-D window op (Conv, MaxPool, AveragePool over [N, C, L]) as the 2-D one of height 1
    on :meth:`_Converter.as2d`'s tensor; a 1-D weight [O, I, K] becomes [O, I, 1, K]."""
    a = dict(a)
    for key in ("kernel_shape", "strides", "dilations"):
        if key in a:
            a[key] = [1, *a[key]]
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    ins = [c.as2d(ins[0]), *ins[1:]]
    if len(ins) > 1 and ins[1] in c.params and c.params[ins[1]].ndim == 3:
        c.params[f"{name}.weight2d"] = c.params[ins[1]][:, :, None, :]
        ins[1] = f"{name}.weight2d"
    conv2d(c, name, ins, [f"{outs[0]}.as2d", *outs[1:]], a)
    c.from2d(name, f"{outs[0]}.as2d", outs[0])


def _conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    w = c.const("Conv", name, ins[1], "the weight")
    if w.ndim == 3 and len(c.shape(ins[0])) == 3:
        _as_2d(c, name, ins, outs, a, _conv)
        return
    if w.ndim != 4:
        raise c.fail("Conv", name, f"only 1-D and 2-D convolutions are supported (weight rank "
                                   f"{w.ndim})")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    if kernel != list(w.shape[2:]):
        raise c.fail("Conv", name, f"kernel_shape {kernel} is not its weight's {list(w.shape[2:])}")
    strides, pads, dil = c.spatial("Conv", name, a, kernel, ins[0])
    if len(ins) > 2 and ins[2]:
        c.const("Conv", name, ins[2], "the bias")
    c.emit("Conv", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)))


def _conv_t(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    w = c.const("ConvTranspose", name, ins[1], "the weight")
    if w.ndim != 4:
        raise c.fail("ConvTranspose", name, "only 2-D transposed convolution is supported")
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise c.fail("ConvTranspose", name, f"auto_pad={a['auto_pad']} is not supported")
    kernel = list(a.get("kernel_shape", w.shape[2:]))
    strides, pads, dil = c.spatial("ConvTranspose", name, a, kernel, ins[0])
    c.emit("ConvTranspose", name, [i for i in ins if i], outs[:1], strides=strides, pads=pads,
           dilations=dil, group=int(a.get("group", 1)),
           output_padding=list(a.get("output_padding", [0, 0])))


def _gemm(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = int(a.get("transA", 0)), int(a.get("transB", 0))
    b = c.params.get(ins[1])
    bias = c.params.get(ins[2]) if len(ins) > 2 and ins[2] else None
    has_c = len(ins) > 2 and bool(ins[2])
    if not ta and b is not None and b.ndim == 2 and (not has_c or bias is not None):
        w = b if tb else b.T
        if alpha != 1.0:
            w = w * alpha
        wname = f"{name}.weight"
        # one copy at most (VGG's 25088x4096 weight is 411 MB)
        c.params[wname] = np.ascontiguousarray(w, dtype=np.float32)
        dins = [ins[0], wname]
        if bias is not None:
            n_out = w.shape[0]
            bb = np.broadcast_to(bias.astype(np.float32) * beta, (1, n_out)).reshape(n_out)
            c.params[f"{name}.bias"] = np.ascontiguousarray(bb)
            dins.append(f"{name}.bias")
        c.emit("Dense", name, dins, outs[:1])
        return
    c.emit("Gemm", name, [i for i in ins if i], outs[:1], alpha=alpha, beta=beta,
           transA=ta, transB=tb)


def _matmul(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """A constant 2-D right operand makes a Dense layer; a rank > 2 left operand is flattened
    to rows around it (one Dense over all rows, as a 1x1 convolution would be)."""
    b = c.params.get(ins[1])
    xs = c.shape(ins[0])
    if b is None or b.ndim != 2 or ins[0] in c.params or len(xs) < 2:
        c.emit("MatMul", name, ins, outs[:1])
        return
    wname = f"{name}.weight"
    c.params[wname] = np.ascontiguousarray(b.T.astype(np.float32))
    if len(xs) == 2:
        c.emit("Dense", name, [ins[0], wname], outs[:1])
        return
    rows, flat = f"{name}.rows", f"{name}.rows_out"
    c.emit("Reshape", f"{name}.flatten", [ins[0]], [rows], shape=[math.prod(xs[:-1]), xs[-1]],
           allowzero=0)
    c.emit("Dense", name, [rows, wname], [flat])
    c.emit("Reshape", f"{name}.unflatten", [flat], outs[:1], shape=[*xs[:-1], b.shape[1]],
           allowzero=0)


def _binary(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        if "axis" in a or a.get("broadcast"):
            raise c.fail(op, name, "legacy broadcast with 'axis' is not supported; re-export "
                                   "with opset >= 7")
        c.emit(op, name, ins[:2], outs[:1])
    return conv


def _simple(op: str, **defaults: Any) -> Callable[..., None]:
    """A one-input op; ``defaults`` are its attributes with their ONNX default values."""
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        for key in a:
            if key not in defaults:
                raise c.fail(op, name, f"attribute {key!r} is not supported")
        attrs = {k: type(v)(a.get(k, v)) for k, v in defaults.items()}
        c.emit(op, name, ins[:1], outs[:1], **attrs)
    return conv


def _global_pool(op: str) -> Callable[..., None]:
    """Global pooling over H, W of [N, C, H, W], or over L of [N, C, L] (as the 2-D pool of
    height 1 on :meth:`_Converter.as2d`'s tensor)."""
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        rank = len(c.shape(ins[0]))
        if rank not in (3, 4):
            raise c.fail(op, name, f"only 1-D and 2-D global pooling is supported (input rank "
                                   f"{rank})")
        if rank == 3:
            c.as2d(ins[0])  # then emitted on that view
        c.emit_viewed(op, name, ins[:1], outs[0])
    return conv


def _forward(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.extra_outputs_used(outs):
        raise c.fail("Dropout", name, "the mask output is not supported (inference only)")
    c.forward(ins[0], outs[0])


#: Cast targets on activations: floats stay float32 (a float Cast forwards its input); integer
#: and boolean ones are real casts (of masks and ids).
_CAST_TYPES = {"FLOAT": "float32", "DOUBLE": "float32", "FLOAT16": "float32", "INT64": "int64",
               "INT32": "int32", "INT8": "int8", "UINT8": "uint8", "BOOL": "bool"}


def _cast(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    import onnx

    to_name = onnx.TensorProto.DataType.Name(int(a.get("to", 0)))
    to = _CAST_TYPES.get(to_name)
    if to is None:
        raise c.fail("Cast", name, f"a cast of an activation to {to_name} is not supported "
                                   f"({', '.join(_CAST_TYPES)})")
    if to == c.dtype(ins[0]):
        c.forward(ins[0], outs[0])
    else:
        c.emit("Cast", name, ins[:1], outs[:1], to=to)


def _shape(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    shp = np.asarray(c.shape(ins[0]), np.int64)
    rank = len(shp)
    start = c.axis(int(a.get("start", 0)), rank)
    end = c.axis(int(a.get("end", rank)), rank)
    c.params[outs[0]] = shp[max(start, 0):max(end, 0)]


def _size(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    c.params[outs[0]] = np.asarray(math.prod(c.shape(ins[0])), np.int64)


def _clip(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.opset < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo_t = c.const("Clip", name, ins[1] if len(ins) > 1 else "", "min")
        hi_t = c.const("Clip", name, ins[2] if len(ins) > 2 else "", "max")
        lo = None if lo_t is None else float(lo_t.reshape(-1)[0])
        hi = None if hi_t is None else float(hi_t.reshape(-1)[0])
    c.emit("Clip", name, ins[:1], outs[:1], min=lo, max=hi)


def _bn(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if a.get("training_mode", 0):
        raise c.fail("BatchNormalization", name, "training_mode=1 is not supported "
                                                 "(export the model in eval mode)")
    if a.get("spatial", 1) != 1:
        raise c.fail("BatchNormalization", name, "spatial=0 is not supported")
    if c.extra_outputs_used(outs):
        raise c.fail("BatchNormalization", name, "only the first output (inference) is "
                                                 "supported")
    for k, what in zip(range(1, 5), ("scale", "bias", "mean", "var")):
        c.const("BatchNormalization", name, ins[k], what)
    c.emit("BatchNormalization", name, ins[:5], outs[:1], epsilon=float(a.get("epsilon", 1e-5)))


def _layernorm(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.extra_outputs_used(outs):
        raise c.fail("LayerNormalization", name, "only the first output (Y) is supported")
    rank = len(c.shape(ins[0]))
    axis = c.axis(int(a.get("axis", -1)), rank)
    c.emit("LayerNormalization", name, [i for i in ins[:3] if i], outs[:1],
           axes=list(range(axis, rank)), epsilon=float(a.get("epsilon", 1e-5)))


def _pool(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        if "kernel_shape" not in a:
            raise c.fail(op, name, "kernel_shape is required")
        if len(a["kernel_shape"]) == 1 and len(c.shape(ins[0])) == 3:
            _as_2d(c, name, ins, outs, a, conv)
            return
        kernel = list(a["kernel_shape"])
        strides, pads, dil = c.spatial(op, name, a, kernel, ins[0])
        if dil != [1, 1]:
            raise c.fail(op, name, f"dilations={dil} are not supported (only 1)")
        if a.get("storage_order", 0):
            raise c.fail(op, name, "storage_order=1 is not supported")
        if c.extra_outputs_used(outs):
            raise c.fail(op, name, "the Indices output is not supported")
        extra = [0, 0]
        if a.get("ceil_mode", 0):  # as extra padding at the end (never counted by the mean)
            extra = [ceil_mode_extra(size, k, s, pads[i], pads[i + 2])
                     for i, (size, k, s) in enumerate(zip(c.shape(ins[0])[2:], kernel,
                                                          strides))]
            pads = [pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1]]
        attrs: dict[str, Any] = {}
        if op == "AveragePool":
            attrs["count_include_pad"] = bool(a.get("count_include_pad", 0))
            if any(extra):
                attrs["ceil_extra"] = extra
        c.emit(op, name, ins[:1], outs[:1], kernel_shape=kernel, strides=strides, pads=pads,
               **attrs)
    return conv


def _reduce_axes(c: _Converter, op: str, name: str, ins: Ins, a: Attrs) -> list[int]:
    rank = len(c.shape(ins[0]))
    if "axes" in a:
        axes = list(a["axes"])
    elif len(ins) > 1 and ins[1]:
        axes = [int(v) for v in c.const(op, name, ins[1], "axes").reshape(-1)]
    else:
        axes = []
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return []
        axes = list(range(rank))
    return sorted(c.axis(int(v), rank) for v in axes)


def _reduce(op: str, global_op: str) -> Callable[..., None]:
    """ReduceMean / ReduceMax; over H and W of an NCHW tensor it is global pooling."""
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        axes = _reduce_axes(c, op, name, ins, a)
        keep = bool(a.get("keepdims", 1))
        xs = c.shape(ins[0])
        if not axes:
            c.forward(ins[0], outs[0])
        elif len(xs) == 4 and axes == [2, 3]:
            if keep:
                c.emit(global_op, name, ins[:1], outs[:1])
            else:
                mid = f"{name}.pooled"
                c.emit(global_op, name, ins[:1], [mid])
                c.emit("Reshape", f"{name}.squeeze", [mid], outs[:1], shape=list(xs[:2]),
                       allowzero=0)
        else:
            c.emit(op, name, ins[:1], outs[:1], axes=axes, keepdims=keep)
    return conv


def _flatten(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    rank = len(c.shape(ins[0]))
    axis = int(a.get("axis", 1))
    c.emit("Flatten", name, ins[:1], outs[:1], axis=axis + rank if axis < 0 else axis)


def _static_reshape(c: _Converter, name: str, x: str, out: str, shape: list[int]) -> None:
    c.emit("Reshape", name, [x], [out], shape=[int(v) for v in shape], allowzero=0)


def _reshape(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.opset < 5:
        target = list(a["shape"])
    else:
        target = [int(v) for v in c.const("Reshape", name, ins[1], "the target shape")]
    xs = c.shape(ins[0])
    if not a.get("allowzero", 0):
        target = [xs[i] if v == 0 else v for i, v in enumerate(target)]
    if target.count(-1) > 1:
        raise c.fail("Reshape", name, f"target shape {target} has more than one -1")
    if -1 in target:
        known = math.prod(v for v in target if v != -1)
        target[target.index(-1)] = math.prod(xs) // known if known else 0
    if math.prod(target) != math.prod(xs):
        raise c.fail("Reshape", name, f"cannot reshape {list(xs)} to {target}")
    _static_reshape(c, name, ins[0], outs[0], target)


def _axes_arg(c: _Converter, op: str, name: str, ins: Ins, a: Attrs) -> list[int] | None:
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    if len(ins) > 1 and ins[1]:
        return [int(v) for v in c.const(op, name, ins[1], "axes").reshape(-1)]
    return None


def _unsqueeze(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = list(c.shape(ins[0]))
    axes = _axes_arg(c, "Unsqueeze", name, ins, a)
    if axes is None:
        raise c.fail("Unsqueeze", name, "axes are required")
    rank = len(xs) + len(axes)
    for ax in sorted(c.axis(v, rank) for v in axes):
        xs.insert(ax, 1)
    _static_reshape(c, name, ins[0], outs[0], xs)


def _squeeze(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = list(c.shape(ins[0]))
    axes = _axes_arg(c, "Squeeze", name, ins, a)
    drop = {c.axis(v, len(xs)) for v in axes} if axes is not None else \
        {k for k, d in enumerate(xs) if d == 1}
    _static_reshape(c, name, ins[0], outs[0], [d for k, d in enumerate(xs) if k not in drop])


def _transpose(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    rank = len(c.shape(ins[0]))
    perm = [int(v) for v in a.get("perm", range(rank - 1, -1, -1))]
    c.emit("Transpose", name, ins[:1], outs[:1], perm=perm)


def _slice_attrs(shape: tuple[int, ...], starts: list[int], ends: list[int],
                 axes: list[int], steps: list[int]) -> dict[str, list[Any]]:
    """Canonical Slice attributes: non-negative axes, clamped bounds (an end of None runs to
    the start of the axis for a negative step)."""
    out: dict[str, list[Any]] = {"axes": [], "starts": [], "ends": [], "steps": []}
    for ax, b, e, st in zip(axes, starts, ends, steps):
        ax = ax + len(shape) if ax < 0 else ax
        b, e, st = slice(int(max(min(b, 2**62), -2**62)), int(max(min(e, 2**62), -2**62)),
                         int(st)).indices(shape[ax])
        out["axes"].append(ax)
        out["starts"].append(b)
        out["ends"].append(None if e < 0 else e)
        out["steps"].append(st)
    return out


def _slice(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    xs = c.shape(ins[0])
    if c.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        def arg(k: int, what: str) -> list[int] | None:
            v = c.const("Slice", name, ins[k] if len(ins) > k else "", what)
            return None if v is None else [int(x) for x in v.reshape(-1)]
        starts, ends = arg(1, "starts"), arg(2, "ends")
        axes = arg(3, "axes") or list(range(len(starts)))
        steps = arg(4, "steps") or [1] * len(starts)
    if 0 in steps:
        raise c.fail("Slice", name, "a step of 0 is not valid")
    c.emit("Slice", name, ins[:1], outs[:1], **_slice_attrs(xs, starts, ends, axes, steps))


def _split(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """One Slice per output."""
    xs = c.shape(ins[0])
    axis = c.axis(int(a.get("axis", 0)), len(xs))
    n_out = len(outs)
    if "split" in a:
        sizes = [int(v) for v in a["split"]]
    elif len(ins) > 1 and ins[1]:
        sizes = [int(v) for v in c.const("Split", name, ins[1], "split").reshape(-1)]
    else:  # equal parts (opset 18: num_outputs; the last part may be smaller)
        part = -(-xs[axis] // n_out)
        sizes = [min(part, xs[axis] - k * part) for k in range(n_out)]
    if len(sizes) != n_out or sum(sizes) != xs[axis]:
        raise c.fail("Split", name, f"split sizes {sizes} do not cover axis {axis} "
                                    f"({xs[axis]}) in {n_out} outputs")
    begin = 0
    for k, (size, out) in enumerate(zip(sizes, outs)):
        if out:
            c.emit("Slice", f"{name}.{k}", ins[:1], [out],
                   **_slice_attrs(xs, [begin], [begin + size], [axis], [1]))
        begin += size


def _gather(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """Constant indices: ``Gather`` (a selection of the input's values); indices computed at
    run time (token ids into an embedding table): ``Take``, which checks their range."""
    xs = c.shape(ins[0])
    axis = c.axis(int(a.get("axis", 0)), len(xs))
    if ins[1] not in c.params:
        if c.dtype(ins[1]) not in ("int64", "int32"):
            raise c.fail("Gather", name, f"indices {ins[1]!r} are {c.dtype(ins[1])}, not "
                                         f"integers")
        c.emit("Take", name, ins[:2], outs[:1], axis=axis)
        return
    idx = c.const("Gather", name, ins[1], "the indices").astype(np.int64)
    idx = np.where(idx < 0, idx + xs[axis], idx)
    c.emit("Gather", name, ins[:1], outs[:1], axis=axis, indices=idx.tolist())


def _concat(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if "axis" not in a:
        raise c.fail("Concat", name, "the axis attribute is required")
    ins = [i for i in ins if i and math.prod(c.shape(i)) > 0]  # empty parts add nothing
    rank = len(c.shape(ins[0]))
    c.emit("Concat", name, ins, outs[:1], axis=c.axis(int(a["axis"]), rank))


def _boolean(op: str) -> Callable[..., None]:
    """Comparisons and logic (attention masks): a boolean tensor."""
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        c.emit(op, name, [i for i in ins if i], outs[:1])
    return conv


def _where(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    if c.dtype(ins[0]) != "bool":
        raise c.fail("Where", name, f"condition {ins[0]!r} is {c.dtype(ins[0])}, not bool")
    c.emit("Where", name, ins[:3], outs[:1])


_ATTENTION_ATTRS = {"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode",
                    "scale", "softcap", "softmax_precision"}


def _attention(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    """ONNX ``Attention`` (opset 23: what the dynamo exporter writes for
    ``F.scaled_dot_product_attention`` from opset 23 on) as the ops it stands for:
    ``softmax(Q·Kᵀ·scale (+ softcap) + mask + causal mask)·V``, 4-D ``[B, H, S, D]`` inputs or
    3-D ``[B, S, H·D]`` ones with ``q_num_heads``; no KV cache, as many K/V heads as Q heads."""
    for key in a:
        if key not in _ATTENTION_ATTRS:
            raise c.fail("Attention", name, f"attribute {key!r} is not supported")
    if len(ins) > 4 and any(ins[4:]):
        raise c.fail("Attention", name, "a KV cache (past_key, past_value, nonpad_kv_seqlen) "
                                        "is not supported")
    if c.extra_outputs_used(outs):
        raise c.fail("Attention", name, "only the first output (Y) is supported")
    q, k, v = ins[:3]
    rank = len(c.shape(q))
    heads = int(a.get("q_num_heads", 0))
    if rank == 3:
        if not heads or int(a.get("kv_num_heads", heads)) != heads:
            raise c.fail("Attention", name, "3-D inputs need q_num_heads equal to kv_num_heads")
        q, k, v = (_split_heads(c, f"{name}.{t}", x, heads) for t, x in zip("qkv", (q, k, v)))
    elif rank != 4:
        raise c.fail("Attention", name, f"inputs of rank {rank} are not supported (3 or 4)")
    if c.shape(q)[1] != c.shape(k)[1] or c.shape(k)[1] != c.shape(v)[1]:
        raise c.fail("Attention", name, "grouped K/V heads (fewer than Q's) are not supported")
    sq, skv = c.shape(q)[2], c.shape(k)[2]
    scale = float(a.get("scale", 1.0 / math.sqrt(c.shape(q)[3])))
    c.emit("Transpose", f"{name}.kt", [k], [f"{name}.kt"], perm=[0, 1, 3, 2])
    c.emit("MatMul", f"{name}.qk", [q, f"{name}.kt"], [f"{name}.qk"])
    c.params[f"{name}.scale"] = np.asarray(scale, np.float32)
    x = f"{name}.scores"
    c.emit("Mul", x, [f"{name}.qk", f"{name}.scale"], [x])
    softcap = float(a.get("softcap", 0.0))
    if softcap > 0:
        c.params[f"{name}.softcap"] = np.asarray(softcap, np.float32)
        c.emit("Div", f"{name}.capped", [x, f"{name}.softcap"], [f"{name}.capped"])
        c.emit("Tanh", f"{name}.tanh", [f"{name}.capped"], [f"{name}.tanh"])
        x = f"{name}.soft"
        c.emit("Mul", x, [f"{name}.tanh", f"{name}.softcap"], [x])
    mask = ins[3] if len(ins) > 3 and ins[3] else None
    if mask is not None:
        if c.shape(mask)[-1] != skv:
            raise c.fail("Attention", name, f"a mask of {c.shape(mask)[-1]} keys for {skv} "
                                            f"keys is not supported")
        if c.dtype(mask) == "bool":
            c.params[f"{name}.zero"] = np.zeros((), np.float32)
            c.params[f"{name}.ninf"] = np.full((), -np.inf, np.float32)
            c.emit("Where", f"{name}.bias", [mask, f"{name}.zero", f"{name}.ninf"],
                   [f"{name}.bias"])
            mask = f"{name}.bias"
        c.emit("Add", f"{name}.masked", [x, mask], [f"{name}.masked"])
        x = f"{name}.masked"
    if int(a.get("is_causal", 0)):
        allowed = np.arange(skv)[None, :] <= np.arange(sq)[:, None]
        c.params[f"{name}.causal"] = np.where(allowed, 0, -np.inf).astype(np.float32)
        c.emit("Add", f"{name}.causal_masked", [x, f"{name}.causal"],
               [f"{name}.causal_masked"])
        x = f"{name}.causal_masked"
    c.emit("Softmax", f"{name}.softmax", [x], [f"{name}.probs"], axis=-1, legacy=False)
    if rank == 4:
        c.emit("MatMul", name, [f"{name}.probs", v], outs[:1])
        return
    c.emit("MatMul", name, [f"{name}.probs", v], [f"{name}.heads"])
    c.emit("Transpose", f"{name}.merge", [f"{name}.heads"], [f"{name}.merged"],
           perm=[0, 2, 1, 3])
    b, s, h, d = c.shape(f"{name}.merged")
    _static_reshape(c, f"{name}.unheads", f"{name}.merged", outs[0], [b, s, h * d])


def _split_heads(c: _Converter, name: str, x: str, heads: int) -> str:
    """``[B, S, H·D]`` -> ``[B, H, S, D]``."""
    b, s, hd = c.shape(x)
    _static_reshape(c, f"{name}.heads", x, f"{name}.heads", [b, s, heads, hd // heads])
    c.emit("Transpose", f"{name}.split", [f"{name}.heads"], [f"{name}.split"],
           perm=[0, 2, 1, 3])
    return f"{name}.split"


def _softmax(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        legacy = c.opset < 13
        c.emit(op, name, ins[:1], outs[:1], axis=int(a.get("axis", 1 if legacy else -1)),
               legacy=legacy)
    return conv


def _expand(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    target = [int(v) for v in c.const("Expand", name, ins[1], "the shape")]
    shape = list(np.broadcast_shapes(c.shape(ins[0]), tuple(target)))
    if tuple(shape) == c.shape(ins[0]):
        c.forward(ins[0], outs[0])
    else:
        c.emit("Expand", name, ins[:1], outs[:1], shape=shape)


def _minmax(op: str) -> Callable[..., None]:
    def conv(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
        ins = [i for i in ins if i]
        if len(ins) == 1:
            c.forward(ins[0], outs[0])
            return
        acc = ins[0]
        for k, other in enumerate(ins[1:]):  # variadic: a chain of binary ops
            last = k == len(ins) - 2
            out = outs[0] if last else f"{name}.{k}"
            c.emit(op, name if last else f"{name}.{k}", [acc, other], [out])
            acc = out
    return conv


def _prelu(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    c.const("PRelu", name, ins[1], "the slope")
    c.emit("PRelu", name, ins[:2], outs[:1])


def _pad(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise c.fail("Pad", name, f"mode={mode} is not supported (constant, reflect, edge)")
    if c.opset < 11:
        pads, value = list(a["pads"]), float(a.get("value", 0.0))
    else:
        pads = [int(v) for v in c.const("Pad", name, ins[1], "pads")]
        v = c.const("Pad", name, ins[2] if len(ins) > 2 else "", "constant_value")
        value = 0.0 if v is None else float(np.asarray(v).reshape(-1)[0])
        if len(ins) > 3 and ins[3]:  # opset 18: pads for the listed axes only
            rank = len(c.shape(ins[0]))
            axes = [c.axis(int(v), rank) for v in c.const("Pad", name, ins[3], "axes")]
            full = [0] * (2 * rank)
            for k, ax in enumerate(axes):
                full[ax], full[ax + rank] = pads[k], pads[k + len(axes)]
            pads = full
    if min(pads) < 0:
        raise c.fail("Pad", name, "negative pads are not supported")
    c.emit("Pad", name, ins[:1], outs[:1], pads=pads, mode=mode, value=value)


_COORD_MODES = ("asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners",
                "tf_half_pixel_for_nearest")


def _resize(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise c.fail("Resize", name, f"mode={mode} is not supported (nearest, linear)")
    for key in ("antialias", "exclude_outside"):
        if a.get(key, 0):
            raise c.fail("Resize", name, f"{key}={a[key]} is not supported (only 0)")
    if "axes" in a or a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise c.fail("Resize", name, "axes / keep_aspect_ratio_policy are not supported")
    coord = a.get("coordinate_transformation_mode", "asymmetric" if c.opset < 11
                  else "half_pixel")
    allowed = _COORD_MODES if mode == "nearest" else _COORD_MODES[:4]
    if coord not in allowed:
        raise c.fail("Resize", name, f"coordinate_transformation_mode={coord} is not "
                                     f"supported with mode={mode} ({', '.join(allowed)})")
    nearest = a.get("nearest_mode", "floor" if c.opset < 11 else "round_prefer_floor")
    if c.opset < 11:
        scales_t, sizes_t = c.const("Resize", name, ins[1], "scales"), None
    else:
        scales_t = c.const("Resize", name, ins[2] if len(ins) > 2 else "", "scales")
        sizes_t = c.const("Resize", name, ins[3] if len(ins) > 3 else "", "sizes")
    scales = [float(v) for v in scales_t] if scales_t is not None and scales_t.size else None
    sizes = [int(v) for v in sizes_t] if sizes_t is not None and sizes_t.size else None
    if scales is None and sizes is None:
        raise c.fail("Resize", name, "neither scales nor sizes is given")
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=sizes, mode=mode,
           coordinate_transformation_mode=coord, nearest_mode=nearest)


def _upsample(c: _Converter, name: str, ins: Ins, outs: Ins, a: Attrs) -> None:
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        raise c.fail("Upsample", name, f"mode={mode} is not supported (nearest, linear)")
    if "scales" in a:
        scales = [float(v) for v in a["scales"]]
    elif "height_scale" in a:
        scales = [1.0, 1.0, float(a["height_scale"]), float(a["width_scale"])]
    else:
        scales = [float(v) for v in c.const("Upsample", name, ins[1], "scales")]
    c.emit("Resize", name, ins[:1], outs[:1], scales=scales, sizes=None,
           mode="nearest" if mode == "nearest" else "linear",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def _qparams(c: _Converter, op: str, name: str, ins: list[str], a: dict[str, Any], k: int = 1
             ) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point (default 0 of uint8) of a (De)QuantizeLinear: its inputs ``k``,
    ``k + 1`` (a QOperator op has several pairs)."""
    if int(a.get("block_size", 0)):
        raise c.fail(op, name, "blocked quantization (block_size) is not supported")
    scale = c.const(op, name, ins[k], "the scale").astype(np.float64)
    zp = c.const(op, name, ins[k + 1], "the zero point") if len(ins) > k + 1 and ins[k + 1] \
        else None
    if zp is None:
        zp = np.zeros(scale.shape, np.uint8)
    if zp.dtype not in (np.int8, np.uint8):
        raise c.fail(op, name, f"zero point of type {zp.dtype} is not supported (int8, uint8)")
    return scale, zp


def _dequantize(onode: Any, vals: list[np.ndarray | None]) -> np.ndarray:
    """DequantizeLinear of constants (int8 weights, int32 biases)."""
    from onnx import helper

    axis = next((helper.get_attribute_value(a) for a in onode.attribute if a.name == "axis"), 1)
    return _dequantize_values(vals[0], vals[1], vals[2] if len(vals) > 2 else None, axis)


def _dequantize_values(q: np.ndarray, scale: Any, zp: Any = None, axis: int = 1) -> np.ndarray:
    """``(q - zero) * scale`` as float32, per tensor or per channel along ``axis``."""
    scale = np.asarray(scale, np.float64)
    zp = np.asarray(zp, np.float64) if zp is not None else 0.0
    shape = [1] * q.ndim
    if scale.ndim == 1 and scale.size > 1 and q.ndim:
        shape[axis % q.ndim] = -1
    return ((q.astype(np.float64) - np.reshape(zp, shape if np.ndim(zp) else ()))
            * scale.reshape(shape if scale.ndim else ())).astype(np.float32)


def _quantize_linear(c: _Converter, name: str, ins: list[str], outs: list[str],
                     a: dict[str, Any]) -> None:
    _qparams(c, "QuantizeLinear", name, ins, a)
    c.quantized[outs[0]] = (ins[0], {"ins": ins, "attrs": a, "name": name})


def _dequantize_linear(c: _Converter, name: str, ins: list[str], outs: list[str],
                       a: dict[str, Any]) -> None:
    """A QuantizeLinear + DequantizeLinear pair on an activation becomes one FakeQuant node (its
    scale, zero point and integer range are what the quantizer uses for that tensor). On
    constants (int8 weights, int32 biases) both fold at import like any constant node."""
    op = "DequantizeLinear"
    scale, zp = _qparams(c, op, name, ins, a)
    if ins[0] in c.qvalues:  # a QOperator op's integer output: its float values
        c.forward(c.qvalues[ins[0]], outs[0])
        return
    if ins[0] not in c.quantized:
        raise c.fail(op, name, f"input {ins[0]!r} is neither a constant nor a "
                               f"QuantizeLinear output")
    src, q = c.quantized.pop(ins[0])
    qs, qz = _qparams(c, "QuantizeLinear", q["name"], q["ins"], q["attrs"])
    if not (np.array_equal(qs, scale) and np.array_equal(qz, zp)):
        raise c.fail(op, name, "its scale or zero point differs from its QuantizeLinear's")
    _fake_quant(c, op, name, src, outs[0], scale, zp)


def _fake_quant(c: _Converter, op: str, name: str, x: str, out: str, scale: np.ndarray,
                zp: np.ndarray) -> None:
    """``out`` = ``x`` quantized at (``scale``, ``zp``) and dequantized: one ``FakeQuant``
    node (per tensor; on the 4-D view inside a 1-D network)."""
    if scale.size != 1 or zp.size != 1:
        raise c.fail(op, name, "per-axis quantization of an activation is not supported")
    info = np.iinfo(zp.dtype)
    c.emit_viewed("FakeQuant", name, [x], out, scale=float(scale.reshape(-1)[0]),
                  zero_point=int(zp.reshape(-1)[0]), qmin=int(info.min), qmax=int(info.max))


def _converts(name: str, fn: Callable[..., None]) -> None:
    ops.attach(name, onnx=fn)


_converts("Conv", _conv)
_converts("ConvTranspose", _conv_t)
_converts("Gemm", _gemm)
_converts("MatMul", _matmul)
_converts("Add", _binary("Add"))
_converts("Sub", _binary("Sub"))
_converts("Mul", _binary("Mul"))
_converts("Div", _binary("Div"))
_converts("Pow", _binary("Pow"))
_converts("Relu", _simple("Relu"))
_converts("Tanh", _simple("Tanh"))
_converts("Sigmoid", _simple("Sigmoid"))
_converts("Erf", _simple("Erf"))
_converts("Sqrt", _simple("Sqrt"))
_converts("Exp", _simple("Exp"))
_converts("Neg", _simple("Neg"))
_converts("Abs", _simple("Abs"))
_converts("Reciprocal", _simple("Reciprocal"))
_converts("HardSwish", _simple("HardSwish"))
_converts("Softplus", _simple("Softplus"))
_converts("Mish", _simple("Mish"))
_converts("GlobalAveragePool", _global_pool("GlobalAveragePool"))
_converts("GlobalMaxPool", _global_pool("GlobalMaxPool"))
_converts("Elu", _simple("Elu", alpha=1.0))
_converts("Max", _minmax("Max"))
_converts("Min", _minmax("Min"))
_converts("Expand", _expand)
_converts("HardSigmoid", _simple("HardSigmoid", alpha=0.2, beta=0.5))
_converts("LeakyRelu", _simple("LeakyRelu", alpha=0.01))
_converts("Gelu", _simple("Gelu", approximate="none"))
_converts("PRelu", _prelu)
_converts("Clip", _clip)
_converts("BatchNormalization", _bn)
_converts("LayerNormalization", _layernorm)
_converts("MaxPool", _pool("MaxPool"))
_converts("AveragePool", _pool("AveragePool"))
_converts("ReduceMean", _reduce("ReduceMean", "GlobalAveragePool"))
_converts("ReduceMax", _reduce("ReduceMax", "GlobalMaxPool"))
_converts("Flatten", _flatten)
_converts("Reshape", _reshape)
_converts("Unsqueeze", _unsqueeze)
_converts("Squeeze", _squeeze)
_converts("Transpose", _transpose)
_converts("Slice", _slice)
_converts("Split", _split)
_converts("Gather", _gather)
_converts("Concat", _concat)
_converts("Softmax", _softmax("Softmax"))
_converts("LogSoftmax", _softmax("LogSoftmax"))
_converts("Pad", _pad)
_converts("Resize", _resize)
_converts("Upsample", _upsample)
_converts("Identity", _forward)
_converts("Dropout", _forward)
_converts("Cast", _cast)
_converts("Shape", _shape)
_converts("Size", _size)
_converts("QuantizeLinear", _quantize_linear)
_converts("DequantizeLinear", _dequantize_linear)
_converts("Where", _where)
_converts("Attention", _attention)
_converts("IsInf", _simple("IsInf", detect_negative=1, detect_positive=1))
_converts("Not", _boolean("Not"))
_converts("IsNaN", _boolean("IsNaN"))
_converts("Equal", _boolean("Equal"))
_converts("Less", _boolean("Less"))
_converts("Greater", _boolean("Greater"))
_converts("LessOrEqual", _boolean("LessOrEqual"))
_converts("GreaterOrEqual", _boolean("GreaterOrEqual"))
_converts("And", _boolean("And"))
_converts("Or", _boolean("Or"))
_converts("Xor", _boolean("Xor"))


def _view_op(op: str) -> bool:
    """An op of one activation input (the first; the others scalars or, for
    BatchNormalization, per-channel constants) that runs on the 4-D tensors of a 1-D network
    as it would on its 3-D ones (:meth:`_Converter.as2d`)."""
    o = ops.get(op)
    return o is not None and o.view and not _view_binary(op)


def _view_binary(op: str) -> bool:
    """An element-wise op of two activations of one shape that does the same."""
    o = ops.get(op)
    return o is not None and o.view and o.elementwise and not o.unary


def _supported() -> str:
    """The ops imported on activations, for the error message (any standard op is also
    evaluated on constants)."""
    default = sorted(o.name for o in ops.all_ops() if o.onnx and not o.domain)
    ms = sorted(f"{o.domain}::{o.name}" for o in ops.all_ops() if o.onnx and o.domain)
    return ", ".join([*default, *ms])
