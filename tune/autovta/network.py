"""A target network's VTA layers, and their cycles on a candidate configuration.

Evaluating a hardware candidate on a network needs the instruction stream of every layer that
runs on VTA, lowered for that candidate's :class:`~vta.isa.Config`. Quantization is the expensive
part of compiling a network (it runs the float and int8 graphs on calibration samples), so a
network is compiled ONCE, for the caller's base configuration (the hardware search keeps its data
widths), to get its quantized graph and tensor shapes; what survives is a small JSON-able list of
:class:`VTALayer` (convolution geometry plus the requantization shift and clip bounds), cached on
disk per model and configuration. For each candidate, every layer is lowered as the compiler
lowers it (:mod:`vta.compiler.graph.lowering`: the same topi template, its default knobs for that
configuration as ranked by vta.sim.perf, the tir passes and code generation in record mode) at
placeholder DRAM addresses, and :func:`vta.sim.perf.estimate` gives its cycles with the candidate's
memory port (:func:`port_params`: one bus word per cycle). No data is computed per candidate.

The placeholder addresses do not change the estimate: the compiler's memory plan aligns every
tensor as these placeholders are (:func:`vta.compiler.build.arena_align`: at least 256 bytes,
a multiple of any bus width), and the performance model only looks
at addresses modulo the bus width.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vta.compiler import ops
from vta.compiler.build import placed_offsets
from vta.compiler.graph import zoo
from vta.compiler.graph.errors import ModelError
from vta.compiler.graph.ir import Node
from vta.compiler.graph.lowering import plan_layer, record_layer
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.topi import conv2d_out_hw
from vta.isa import Config, decode_program
from vta.isa.errors import VTAError
from vta.isa.fileio import kit_version, loads_json, read_bytes, user_cache_dir, write_atomic
from vta.isa.stats import RunStats
from vta.sim.perf import DEFAULT_PARAMS, estimate
from vta.tune.vta_tasks import quantized_model

#: Bumped when the layer extraction changes (invalidates the on-disk cache).
LAYERS_FORMAT = 5


class NetworkError(VTAError):
    """A target network that cannot be loaded or has no layer VTA can run."""


def cache_dir(*parts: str) -> Path:
    """The kit's user cache (``$VTA_CACHE_DIR``, else ``$XDG_CACHE_HOME/vta-kit``, else
    ``~/.cache/vta-kit``), subdirectory ``autovta/<parts>``."""
    return user_cache_dir("autovta", *parts)


@dataclass(frozen=True)
class VTALayer:
    """One layer the compiler offloads to VTA (a quantized conv2d, grouped or not, or dense):
    what its lowering depends on besides the configuration."""

    name: str
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    #: conv attributes the lowering reads: group, strides, pads, dilations
    attrs: tuple[tuple[str, Any], ...]
    #: requantization: one right shift for the layer, or one per output channel
    shift: int | tuple[int, ...]
    lo: int
    hi: int
    #: the fixed-point multiplier (one, or one per output channel) and the shift after it
    mul: int | tuple[int, ...] = 1
    shift2: int = 0

    @property
    def attr_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs}

    def plan(self, cfg: Config) -> Any:
        """The compiler's :class:`~vta.compiler.graph.lowering.VtaLayer` on ``cfg`` (raises
        ``LayerError`` when no template expresses it there)."""
        a = dict(self.attr_dict, shift=list(self.shift) if isinstance(self.shift, tuple)
                 else self.shift, lo=self.lo, hi=self.hi,
                 mul=list(self.mul) if isinstance(self.mul, tuple) else self.mul,
                 shift2=self.shift2)
        op = "QDense" if len(self.x_shape) == 2 else "QConv"
        return plan_layer(Node(op, self.name, ["x", "w", "b"], ["y"], a), self.x_shape,
                          self.w_shape, cfg)

    @property
    def macs(self) -> int:
        if len(self.x_shape) == 2:
            return int(self.x_shape[0] * self.w_shape[0] * self.w_shape[1])

        a = self.attr_dict
        n, _, h, w = self.x_shape
        o, cg, kh, kw = self.w_shape
        oh, ow = conv2d_out_hw(h, w, kh, kw, a["strides"], a["pads"], a["dilations"])
        return int(n * o * oh * ow * cg * kh * kw)

    @property
    def shape_key(self) -> tuple:
        """Layers with equal keys lower to the same instruction streams."""
        shift = "vector" if isinstance(self.shift, tuple) else self.shift == 0
        mul = "vector" if isinstance(self.mul, tuple) else self.mul == 1
        return (self.x_shape, self.w_shape, self.attrs, shift, mul, self.shift2 == 0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "x_shape": list(self.x_shape), "w_shape": list(self.w_shape),
                "attrs": self.attr_dict,
                "shift": list(self.shift) if isinstance(self.shift, tuple) else self.shift,
                "lo": self.lo, "hi": self.hi,
                "mul": list(self.mul) if isinstance(self.mul, tuple) else self.mul,
                "shift2": self.shift2}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> VTALayer:
        return cls(d["name"], tuple(d["x_shape"]), tuple(d["w_shape"]), _attrs(d["attrs"]),
                   tuple(d["shift"]) if isinstance(d["shift"], list) else int(d["shift"]),
                   int(d["lo"]), int(d["hi"]),
                   tuple(d["mul"]) if isinstance(d.get("mul"), list) else int(d.get("mul", 1)),
                   int(d.get("shift2", 0)))


def _attrs(a: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    keep = ("group", "strides", "pads", "dilations")
    return tuple((k, tuple(a[k]) if isinstance(a[k], list | tuple) else a[k])
                 for k in keep if k in a)


@dataclass(frozen=True)
class Network:
    """The VTA layers of a model (what AutoVTA needs of it)."""

    name: str
    layers: tuple[VTALayer, ...]
    #: layers that run on the CPU whatever the configuration (a light first conv kept float)
    cpu_layers: tuple[str, ...] = ()
    source: str = ""

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    def to_json(self) -> dict[str, Any]:
        return {"format": LAYERS_FORMAT, "name": self.name, "source": self.source,
                "layers": [layer.to_json() for layer in self.layers],
                "cpu_layers": list(self.cpu_layers)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Network:
        return cls(d["name"], tuple(VTALayer.from_json(x) for x in d["layers"]),
                   tuple(d.get("cpu_layers", ())), d.get("source", ""))


def _zoo_names() -> list[str]:
    return list(zoo.ZOO)


def _model_bytes(model: str, zoo_kwargs: Mapping[str, Any]) -> tuple[str, bytes]:
    """(name, ONNX bytes) of a zoo name or an ONNX file (checked: :func:`check_model`)."""
    if model in zoo.ZOO:
        return model, zoo.build(model, **dict(zoo_kwargs)).SerializeToString()
    return Path(model).stem, read_bytes(model, "model file")


def check_model(model: str, zoo_kwargs: Mapping[str, Any],
                input_shapes: Mapping[str, Sequence[int]] | None = None) -> None:
    """A one-line error unless ``model`` is a zoo name or a readable ONNX file (and the zoo
    options or the input shapes apply): what :func:`load_network` would reject, checked
    without loading."""
    if model in zoo.ZOO:
        if input_shapes:
            raise NetworkError(f"input shapes apply to ONNX files, not to the zoo model "
                               f"{model} (its size option: --image-size)")
        return
    p = Path(model)
    if p.suffix.lower() != ".onnx" and not p.exists():
        raise NetworkError(f"unknown model {model!r}: give a zoo model "
                           f"({', '.join(_zoo_names())}) or an .onnx file")
    if zoo_kwargs:
        raise NetworkError(f"zoo options ({', '.join(zoo_kwargs)}) apply to zoo models only, "
                           f"not to {model}")
    if not p.exists():
        raise ModelError(f"model file {p} does not exist")
    if p.is_dir():
        raise ModelError(f"model file {p} is a directory, not an .onnx file")


def extract_layers(model_bytes: bytes, name: str, cfg: Config, source: str = "", *,
                   input_shapes: Mapping[str, Sequence[int]] | None = None) -> Network:
    """Compile the model once (for ``cfg``, whose data widths quantization follows; its inputs
    shaped by ``input_shapes`` as `vta compile --input-shape`) and keep its VTA layers'
    geometry and requantization parameters."""
    import onnx  # deferred: onnx, only when a model is read

    try:
        proto = onnx.load_from_string(model_bytes)
    except Exception as e:  # noqa: BLE001 - protobuf raises several unrelated types
        raise NetworkError(f"{source or name} is not a valid ONNX file "
                           f"({type(e).__name__})") from None
    graph = from_onnx(proto, source=source or name, input_shapes=input_shapes)
    qg, shapes = quantized_model(graph, cfg)
    layers, cpu = [], []
    for n in qg.nodes:
        if not ops.has(n.op, "gemm") or n.inputs[1] not in qg.params:
            # a QMatMul (two activations: attention) has no weight for the resource model
            if ops.has(n.op, "vta_layer"):
                cpu.append(n.name)  # kept in float by the quantizer
            continue
        shift, mul = n.attrs["shift"], n.attrs.get("mul", 1)
        layers.append(VTALayer(n.name, tuple(shapes[n.inputs[0]]),
                               tuple(qg.params[n.inputs[1]].shape), _attrs(n.attrs),
                               tuple(int(v) for v in shift) if isinstance(shift, list)
                               else int(shift), int(n.attrs["lo"]), int(n.attrs["hi"]),
                               tuple(int(v) for v in mul) if isinstance(mul, list | tuple)
                               else int(mul), int(n.attrs.get("shift2", 0))))
    if not layers:
        raise NetworkError(f"{source or name} has no convolution or dense layer VTA can run")
    return Network(name, tuple(layers), tuple(cpu), source or name)


def load_network(model: str, cfg: Config, *, use_cache: bool = True,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 **zoo_kwargs: Any) -> Network:
    """The VTA layers of a zoo model (``resnet18``, ...; ``zoo_kwargs`` such as ``image_size``)
    or of an ONNX file (``input_shapes`` as `vta compile --input-shape`), quantized for
    ``cfg``'s data widths; cached on disk by the model's content, the input shapes, the
    configuration and the kit version."""
    zoo_kwargs = {k: v for k, v in zoo_kwargs.items() if v is not None}
    check_model(model, zoo_kwargs, input_shapes)
    name, data = _model_bytes(model, zoo_kwargs)
    shapes = sorted((k, list(v)) for k, v in (input_shapes or {}).items())
    tag = f"|{cfg.to_json()}|{kit_version()}|{LAYERS_FORMAT}|{shapes}"
    key = hashlib.sha256(data + tag.encode()).hexdigest()[:24]
    path = cache_dir("networks") / f"{name}-{key}.json"
    if use_cache and path.exists():
        try:
            return Network.from_json(loads_json(read_bytes(path, "network cache"), path))
        except (ValueError, KeyError, TypeError, VTAError):
            pass  # a damaged cache entry: rebuild it
    net = extract_layers(data, name, cfg, model, input_shapes=input_shapes)
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(net.to_json()), "network cache")
        except (OSError, VTAError):
            pass  # a read-only cache is not an error
    return net


# --------------------------------------------------------------------------- performance
@dataclass
class NetworkPerf:
    """Cycles of a network's VTA layers on one configuration."""

    cycles: int
    #: layer name -> cycles (layers that lower on this configuration)
    layer_cycles: dict[str, int] = field(default_factory=dict)
    #: layer name -> why it does not fit this configuration's buffers (runs on the CPU)
    unmapped: dict[str, str] = field(default_factory=dict)
    gemm_uops: int = 0
    bytes_loaded: int = 0

    @property
    def complete(self) -> bool:
        return not self.unmapped


def lower_layer(layer: VTALayer, cfg: Config) -> list[Any]:
    """The layer's program for ``cfg`` as the compiler builds it (its template with the
    default knobs for ``cfg``, recorded), at placeholder addresses (raises a VTAError, e.g.
    ``LayerError``, when it does not fit the buffers)."""
    vl = layer.plan(cfg)
    r = record_layer(vl.operator(cfg, vl.default(cfg).knobs))
    return decode_program(r.rec.relocate(0, placed_offsets(r.sizes, cfg)[1]), cfg)


def port_params(bus_width: int, port_width: int | None = None) -> Any:
    """The performance model's parameters (:class:`vta.sim.perf.PerfParams`; the bus width
    itself is the configuration's) for a core with a ``bus_width``-bit memory bus on a board
    whose memory port is ``port_width`` bits wide (None: as wide as the bus): the memory moves
    one word of the narrower of the two per cycle.

    The perf model's default memory bandwidth is tsim's default, 8 bytes per cycle: PYNQ-Z1's
    64-bit HP port at 100 MHz (0.8 GB/s of its 2.1 GB/s DDR3). Every board's port carries one
    word per PL cycle below its DRAM's bandwidth: Ultra96-V2 128 bits at 200 MHz (3.2 of
    8.5 GB/s LPDDR4), ZCU104 128 bits at 250 MHz (4.0 of 19.2 GB/s DDR4). So a 64-bit core
    moves 8 bytes per cycle and a 128-bit core on a 128-bit port 16 (with the default 8 it
    would be no faster than a 64-bit one). tsim runs with ``mem_bandwidth`` equal to this
    ``bandwidth`` model the same port."""
    width = min(bus_width, port_width or bus_width)
    return replace(DEFAULT_PARAMS, bandwidth=width / 8)


def network_cycles(net: Network, cfg: Config, port_width: int | None = None) -> NetworkPerf:
    """Sum the performance model's cycles over the network's VTA layers on ``cfg`` (its bus
    width included) on a ``port_width``-bit board port (:func:`port_params`)."""
    params = port_params(cfg.bus_width, port_width)
    out = NetworkPerf(0)
    memo: dict[tuple, RunStats | str] = {}
    for layer in net.layers:
        key = layer.shape_key
        if key not in memo:
            try:
                memo[key] = estimate(lower_layer(layer, cfg), cfg, params=params)
            except VTAError as e:
                memo[key] = str(e).splitlines()[0]
        st = memo[key]
        if isinstance(st, str):
            out.unmapped[layer.name] = st
            continue
        out.layer_cycles[layer.name] = st.cycles
        out.cycles += st.cycles
        out.gemm_uops += st.gemm_uops
        out.bytes_loaded += sum(st.bytes_loaded.values())
    return out
