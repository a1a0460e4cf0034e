"""The graph IR: a topologically ordered list of nodes over named tensors.

A :class:`Graph` holds its parameters (constant tensors) by name; every other tensor is produced
by exactly one node or is a graph input. Node attributes are plain Python values (ints, floats,
lists, strings) so that a graph serialises to JSON (:meth:`Graph.to_json`) with its parameters
stored apart as arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ModelError


@dataclass
class Node:
    """One operator application: ``outputs = op(inputs; attrs)``."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "name": self.name, "inputs": list(self.inputs),
                "outputs": list(self.outputs), "attrs": _jsonable(self.attrs)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        return cls(d["op"], d["name"], list(d["inputs"]), list(d["outputs"]), dict(d["attrs"]))

    def __str__(self) -> str:
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(self.attrs.items()))
        return (f"{', '.join(self.outputs)} = {self.op}[{self.name}]({', '.join(self.inputs)})"
                + (f" {{{attrs}}}" if attrs else ""))


@dataclass(frozen=True)
class TensorInfo:
    """Shape and dtype of a graph input or output."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass
class Graph:
    """Nodes in topological order, graph inputs/outputs and constant parameters."""

    nodes: list[Node]
    inputs: dict[str, TensorInfo]
    outputs: list[str]
    params: dict[str, np.ndarray] = field(default_factory=dict)
    name: str = "graph"

    # ---------------------------------------------------------------- queries
    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        cons: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    cons.setdefault(i, []).append(n)
        return cons

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def copy(self) -> Graph:
        return Graph([Node(n.op, n.name, list(n.inputs), list(n.outputs), dict(n.attrs))
                      for n in self.nodes], dict(self.inputs), list(self.outputs),
                     dict(self.params), self.name)

    def verify(self) -> None:
        """Check single assignment, definition before use and that the outputs exist."""
        defined = set(self.inputs) | set(self.params)
        for n in self.nodes:
            for i in n.inputs:
                if i and i not in defined:
                    raise ModelError(f"node {n.name} ({n.op}) uses tensor {i!r} before it is "
                                     f"defined (the graph is not in topological order)")
            for o in n.outputs:
                if o in defined:
                    raise ModelError(f"tensor {o!r} is defined twice (node {n.name})")
                defined.add(o)
        for o in self.outputs:
            if o not in defined:
                raise ModelError(f"graph output {o!r} is not produced by any node")

    def remove_unused(self) -> Graph:
        """Drop nodes and parameters nothing depends on (dead code elimination)."""
        live = set(self.outputs)
        kept: list[Node] = []
        for n in reversed(self.nodes):
            if any(o in live for o in n.outputs):
                kept.append(n)
                live.update(i for i in n.inputs if i)
        self.nodes = kept[::-1]
        self.params = {k: v for k, v in self.params.items() if k in live}
        return self

    # ----------------------------------------------------------------- text form
    def __str__(self) -> str:
        lines = [f"graph {self.name}("
                 + ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.inputs.items())
                 + f") -> ({', '.join(self.outputs)})"]
        lines += [f"  {n}" for n in self.nodes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The structure (not the parameter values, which are stored as arrays apart)."""
        return {
            "name": self.name,
            "inputs": {k: v.to_dict() for k, v in self.inputs.items()},
            "outputs": list(self.outputs),
            "params": {k: {"shape": list(v.shape), "dtype": str(v.dtype)}
                       for k, v in self.params.items()},
            "nodes": [n.to_dict() for n in self.nodes],
        }

    @classmethod
    def from_json(cls, d: Any, params: dict[str, np.ndarray]) -> Graph:
        """The graph :meth:`to_json` wrote, checked as a whole (a :class:`ModelError` naming
        the first problem): every field of its type, the parameters those of ``params`` with
        the listed shapes and dtypes, and the structure :meth:`verify` checks."""
        d = _typed(d, dict, "graph")
        inputs = {_name(k, "graph input"): _tensor_info(v, f"graph input {k!r}")
                  for k, v in _typed(d.get("inputs"), dict, "graph inputs").items()}
        nodes = [_node(n, k) for k, n in enumerate(_typed(d.get("nodes"), list, "graph nodes"))]
        outputs = [_name(o, "graph output")
                   for o in _typed(d.get("outputs"), list, "graph outputs")]
        g = cls(nodes, inputs, outputs, _params(d.get("params"), params),
                _name(d.get("name", "graph"), "graph name"))
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ModelError("two graph nodes have the same name")
        if not outputs:
            raise ModelError("the graph has no outputs")
        g.verify()
        return g


def _typed(v: Any, kind: type, what: str) -> Any:
    if not isinstance(v, kind) or isinstance(v, bool):
        raise ModelError(f"{what} is not a {kind.__name__}")
    return v


def _name(v: Any, what: str) -> str:
    if not isinstance(v, str) or not v:
        raise ModelError(f"{what} {v!r} is not a tensor name")
    return v


def _tensor_info(v: Any, what: str) -> TensorInfo:
    v = _typed(v, dict, what)
    shape = _typed(v.get("shape"), list, f"{what}'s shape")
    if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise ModelError(f"{what}'s shape {shape!r} is not a list of sizes")
    dtype = v.get("dtype")
    try:
        ok = isinstance(dtype, str) and str(np.dtype(dtype)) == dtype
    except TypeError:
        ok = False
    if not ok:
        raise ModelError(f"{what}'s dtype {dtype!r} is not a numpy dtype")
    return TensorInfo(tuple(shape), dtype)


def _node(d: Any, k: int) -> Node:
    d = _typed(d, dict, f"graph node {k}")
    name = _name(d.get("name"), f"graph node {k}'s name")
    what = f"node {name}"
    op = _name(d.get("op"), f"{what}'s op")
    # an empty input name is an omitted optional input (ONNX's convention)
    inputs = _typed(d.get("inputs"), list, f"{what}'s inputs")
    if not all(isinstance(i, str) for i in inputs):
        raise ModelError(f"{what}'s inputs {inputs!r} are not tensor names")
    outputs = [_name(o, f"{what}'s output") for o in _typed(d.get("outputs"), list,
                                                             f"{what}'s outputs")]
    if not outputs:
        raise ModelError(f"{what} has no outputs")
    return Node(op, name, list(inputs), outputs, dict(_typed(d.get("attrs"), dict,
                                                             f"{what}'s attributes")))


def _params(listed: Any, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays of the parameters the graph lists, each of its listed shape and dtype."""
    out = {}
    for k, v in _typed(listed, dict, "graph params").items():
        info = _tensor_info(v, f"parameter {k!r}")
        a = arrays.get(k)
        if a is None:
            raise ModelError(f"parameter {k!r} is not in the parameter file")
        if tuple(a.shape) != info.shape or str(a.dtype) != info.dtype:
            raise ModelError(f"parameter {k!r} is {a.dtype}{list(a.shape)}, the graph says "
                             f"{info.dtype}{list(info.shape)}")
        out[k] = a
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v
