"""ONNX -> graph IR, as ``torch.onnx.export`` (TorchScript and dynamo exporters, opsets 11-21)
writes it. This module loads and checks a model and walks its nodes; the conversion of one node
is :class:`.onnx_converter.Converter`, the converters of each op family are :mod:`.onnx_nn`,
:mod:`.onnx_elementwise`, :mod:`.onnx_shape`, :mod:`.onnx_qdq` and :mod:`.onnx_qoperator`
(each registered with its op in :mod:`vta.compiler.ops`).

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
  a 1-D Conv/MaxPool/AveragePool as the 2-D one of height 1, see :meth:`Converter.as2d`).

An op without a converter, on a non-constant input, is an :class:`UnsupportedOpError` of one
line naming the node and the op type; any other failure inside a converter becomes a one-line
:class:`ModelError` naming the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa.errors import VTAError
from vta.isa.fileio import read_bytes

# the converters of each op family register with their op on import
from . import onnx_elementwise, onnx_nn, onnx_qdq, onnx_qoperator, onnx_shape  # noqa: F401
from .errors import ModelError, UnsupportedOpError
from .ir import Graph, TensorInfo
from .onnx_converter import Converter, canonical, first_line
from .validate import check_external_data

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
    # deferred: onnx is a heavy import, made only when a model is read
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
    # deferred: onnx is a heavy import, made only when a model is read
    import onnx

    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{source} contains no graph (is it an ONNX model file?)")
    try:
        onnx.checker.check_model(checked)
    except Exception as e:  # noqa: BLE001 - ValidationError and friends
        raise ModelError(f"{source} is not a valid ONNX model: {first_line(e)}") from None


def _convert(model: Any, source: str, input_shapes: InputShapes) -> Graph:
    """A checked ``onnx.ModelProto`` -> :class:`Graph`."""
    # deferred: onnx is a heavy import, made only when a model is read
    import onnx
    from onnx import numpy_helper

    if model.functions:  # model-local functions (the dynamo exporter may write them)
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as e:  # noqa: BLE001
            raise ModelError(f"{source}: its local functions cannot be inlined: "
                             f"{first_line(e)}") from None
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
    conv = Converter(params, inputs, opset, source)
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


def _to_array(numpy_helper: Any, t: Any, source: str) -> np.ndarray:
    try:
        a = numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"{source}: tensor {t.name!r} cannot be read ({e})") from None
    return canonical(a)


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
    # deferred: onnx is a heavy import, made only when a model is read
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

