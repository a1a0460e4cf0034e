"""Transformers as ``torch.onnx.export`` writes them (issue 37, import): small PyTorch blocks
written here (a BERT encoder layer with token/position/token-type embeddings, a padding mask
and a tanh pooler; GPT blocks with a causal mask, hand-written and through
``F.scaled_dot_product_attention``; a ViT encoder block with ``nn.MultiheadAttention``; Swin
window attention, a regular and a shifted block (relative-position bias, ``torch.roll`` and the
shifted-window mask); an attention of a boolean mask input and of a Hugging Face-style
additive ``finfo.min`` mask), exported with the TorchScript exporter (``dynamo=False``) and
the dynamo one (``dynamo=True``; opset 23 writes ONNX's ``Attention`` op).

- float (the ``--target cpu`` path): the kit's reference execution against onnxruntime, every
  element within 1e-4 of the output's largest magnitude;
- int8 on fsim: bit-exact with the kit's int8 reference; cosine >= 0.99 against onnxruntime's
  float output; Q·Kᵀ and softmax·V (``QMatMul``) and the (1, T, C) residual adds on VTA;
- the compile summary's MACs (Q·Kᵀ and softmax·V included) and its VTA share against a count
  made here from the ONNX graph (onnx shape inference, Conv/Gemm/MatMul nodes);
- a matmul workload tuned by ``vta tune --workload matmul:...`` and its knobs compiled in by
  ``vta compile --tuning-log``;
- token ids outside the vocabulary, a row masked entirely, synthetic calibration of integer
  inputs, a dynamic sequence axis fixed with ``--input-shape``, an unsupported op.
"""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import onnx
import pytest
import torch
from vta.cli.main import main
from vta.compiler.graph.calibration import index_bounds, synthetic_samples
from vta.compiler.graph.errors import InputError, UnsupportedOpError
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import CompileOptions
from vta.compiler.graph.passes import optimize
from vta.compiler.graph.reference import run_float
from vta.isa import Config

from .conftest import assert_close_rel, run_ort

nn, F = torch.nn, torch.nn.functional

VOCAB, T, D, HEADS = 50, 16, 32, 2
WIN = 4  # Swin's window (tokens a side)


class Bert(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, one ``nn.TransformerEncoderLayer``
    (GELU) under a padding mask, a tanh pooler over the first token."""

    def __init__(self) -> None:
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(VOCAB, D), nn.Embedding(T, D), \
            nn.Embedding(2, D)
        self.ln = nn.LayerNorm(D)
        self.layer = nn.TransformerEncoderLayer(D, HEADS, 2 * D, dropout=0.0,
                                                activation="gelu", batch_first=True)
        self.pool = nn.Linear(D, D)

    def forward(self, ids, types, mask):  # noqa: ANN001, ANN201
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.typ(types))
        x = self.layer(x, src_key_padding_mask=mask == 0)
        return torch.tanh(self.pool(x[:, 0]))


class GPT(nn.Module):
    """A decoder block: causal self-attention written out (``masked_fill`` of a ``tril``
    buffer with -inf), or through ``F.scaled_dot_product_attention(is_causal=True)``."""

    def __init__(self, sdpa: bool = False) -> None:
        super().__init__()
        self.sdpa = sdpa
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(1, T, D) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * D, D))
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, ids):  # noqa: ANN001, ANN201
        b, t = ids.shape
        x = self.tok(ids) + self.pos[:, :t]
        q, k, v = (y.view(b, t, HEADS, -1).transpose(1, 2)
                   for y in self.qkv(self.ln1(x)).split(D, dim=-1))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            a = (q @ k.transpose(-2, -1)) / math.sqrt(D // HEADS)
            y = a.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, D))
        return self.head(x + self.mlp(self.ln2(x)))


class ViT(nn.Module):
    """Patch embedding, class token, position embedding, a pre-norm encoder block with
    ``nn.MultiheadAttention``, a classifier on the class token."""

    def __init__(self, patch: int = 4, image: int = 16) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, D, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, D))
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, D) * 0.1)
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.head = nn.Linear(D, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        x = x + self.mlp(self.ln2(x))
        return self.head(x[:, 0])


class SwinBlock(nn.Module):
    """A Swin block: window attention over ``W x W`` windows of the token grid with its learned
    relative-position bias (a table indexed by a constant); ``shift`` > 0 rolls the grid by
    ``-shift`` first (``torch.roll``) and masks (-100) the pairs of tokens that come from
    different regions of the unshifted image, then rolls back; residual adds, an MLP."""

    def __init__(self, res: int, shift: int) -> None:
        super().__init__()
        self.res, self.shift, self.scale = res, shift, (D // HEADS) ** -0.5
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))
        self.table = nn.Parameter(torch.randn((2 * WIN - 1) ** 2, HEADS) * 0.5)
        c = torch.stack(torch.meshgrid(torch.arange(WIN), torch.arange(WIN), indexing="ij"))
        rel = (c.flatten(1)[:, :, None] - c.flatten(1)[:, None, :]).permute(1, 2, 0) + WIN - 1
        self.register_buffer("index", rel[..., 0] * (2 * WIN - 1) + rel[..., 1])
        mask = None
        if shift:
            img = torch.zeros(1, res, res, 1)
            cuts = (slice(0, -WIN), slice(-WIN, -shift), slice(-shift, None))
            for k, (hs, ws) in enumerate((h, w) for h in cuts for w in cuts):
                img[:, hs, ws] = k
            m = self.windows(img).squeeze(-1)
            mask = (m[:, None, :] != m[:, :, None]).float() * -100.0
        self.register_buffer("mask", mask)

    def windows(self, x):  # noqa: ANN001, ANN201
        b, h, w, c = x.shape
        return x.view(b, h // WIN, WIN, w // WIN, WIN, c).permute(0, 1, 3, 2, 4, 5) \
            .reshape(-1, WIN * WIN, c)

    def forward(self, x):  # noqa: ANN001, ANN201
        b, n, c = x.shape
        r = self.res
        y = self.ln1(x).view(b, r, r, c)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        y = self.windows(y)
        nw, t = y.shape[:2]
        q, k, v = self.qkv(y).reshape(nw, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
        a = (q * self.scale) @ k.transpose(-2, -1)
        a = a + self.table[self.index].permute(2, 0, 1).unsqueeze(0)
        if self.mask is not None:
            a = a + self.mask.unsqueeze(1)
        y = self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(nw, t, c))
        y = y.view(b, r // WIN, r // WIN, WIN, WIN, c).permute(0, 1, 3, 2, 4, 5) \
            .reshape(b, r, r, c)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), (1, 2))
        x = x + y.reshape(b, n, c)
        return x + self.mlp(self.ln2(x))


class Swin(nn.Module):
    """Patch embedding of a 16x16 image (2x2 patches: an 8x8 token grid), a regular and a
    shifted window block (4x4 windows, shift 2), mean pooling, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, D, 2, 2)
        self.blocks = nn.Sequential(SwinBlock(8, 0), SwinBlock(8, WIN // 2))
        self.head = nn.Linear(D, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.head(self.blocks(self.patch(x).flatten(2).transpose(1, 2)).mean(1))


class MaskedAttention(nn.Module):
    """Attention over token embeddings under a mask given as an input: a boolean one (True:
    attend) through ``F.scaled_dot_product_attention``, or Hugging Face's additive one
    (``(1 - mask) * finfo.min`` of an int64 0/1 mask, then a written-out softmax)."""

    def __init__(self, additive: bool) -> None:
        super().__init__()
        self.additive = additive
        self.tok = nn.Embedding(VOCAB, D)
        self.qkv, self.out = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, ids, mask):  # noqa: ANN001, ANN201
        b, t = ids.shape
        q, k, v = (y.view(b, t, HEADS, -1).transpose(1, 2)
                   for y in self.qkv(self.tok(ids)).split(D, dim=-1))
        if self.additive:
            bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            a = (q @ k.transpose(-2, -1)) / math.sqrt(D // HEADS) + bias
            y = a.softmax(-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        return self.out(y.transpose(1, 2).reshape(b, t, D))


def _ids(rng: np.random.Generator, shape: tuple[int, ...] = (1, T)) -> np.ndarray:
    return rng.integers(0, VOCAB, shape).astype(np.int64)


def _padding(valid: int, length: int = T) -> np.ndarray:
    return (np.arange(length) < valid).astype(np.int64)[None]


def _inputs(name: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    if name in ("vit", "swin"):
        return {"x": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    if name == "bert":
        return {"ids": _ids(rng), "types": (np.arange(T) >= 9).astype(np.int64)[None],
                "mask": _padding(12)}
    if name == "mask_bool":
        return {"ids": _ids(rng), "mask": _padding(11).astype(bool)}
    if name == "mask_additive":
        return {"ids": _ids(rng), "mask": _padding(11)}
    return {"ids": _ids(rng)}


BUILDERS = {"bert": Bert, "gpt": GPT, "gpt_sdpa": lambda: GPT(sdpa=True), "vit": ViT,
            "swin": Swin, "mask_bool": lambda: MaskedAttention(False),
            "mask_additive": lambda: MaskedAttention(True)}
#: id: (dynamo, opset); "dynamo23" writes ONNX's Attention op for scaled_dot_product_attention
EXPORTS = {"ts": (False, 17), "dynamo": (True, None), "dynamo23": (True, 23)}
_CACHE: dict[tuple[str, str, bool], onnx.ModelProto] = {}


def export(name: str, exporter: str, dynamic: bool = False) -> onnx.ModelProto:
    """Model ``name`` (seeded random init) exported once per session; ``dynamic``: with a
    symbolic sequence axis."""
    key = (name, exporter, dynamic)
    if key not in _CACHE:
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = BUILDERS[name]().eval()
        feeds = _inputs(name)
        args = tuple(torch.from_numpy(v) for v in feeds.values())
        dynamo, opset = EXPORTS[exporter]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if dynamo:
                seq = torch.export.Dim("seq", min=2, max=T)
                shapes = tuple({1: seq} for _ in feeds) if dynamic else None
                prog = torch.onnx.export(model, args, dynamo=True, input_names=list(feeds),
                                         opset_version=opset, dynamic_shapes=shapes,
                                         verbose=False)
                data = prog.model_proto.SerializeToString()
            else:
                f = io.BytesIO()
                axes = {k: {1: "seq"} for k in feeds} if dynamic else None
                torch.onnx.export(model, args, f, dynamo=False, input_names=list(feeds),
                                  opset_version=opset, dynamic_axes=axes)
                data = f.getvalue()
        _CACHE[key] = onnx.load_from_string(data)
    return _CACHE[key]


def reference(model: onnx.ModelProto, exporter: str, feeds: dict[str, np.ndarray]
              ) -> np.ndarray:
    """The model's first output by onnxruntime; by ONNX's reference implementation for an
    ``Attention`` op with a mask (onnxruntime 1.32 refuses the ``[B, 1, 1, S]`` mask the
    dynamo exporter writes: "inconsistent q_sequence_length")."""
    if exporter == "dynamo23" and len(feeds) > 1:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds)[0]
    return run_ort(model, feeds)[0]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


CASES = [(m, e) for m in ("bert", "gpt", "gpt_sdpa", "vit", "swin", "mask_bool", "mask_additive")
         for e in ("ts", "dynamo")] + [("gpt_sdpa", "dynamo23"), ("mask_bool", "dynamo23")]
IDS = [f"{m}-{e}" for m, e in CASES]


@pytest.mark.slow
@pytest.mark.parametrize("name, exporter", CASES, ids=IDS)
def test_float_matches_onnxruntime(name: str, exporter: str) -> None:
    model = export(name, exporter)
    g = from_onnx(model)
    x = _inputs(name, 1)
    assert {k: v.dtype for k, v in x.items()} == {k: np.dtype(v.dtype)
                                                  for k, v in g.inputs.items()}
    ref = reference(model, exporter, x)
    assert_close_rel(run_float(g, x)[g.outputs[0]], ref, 1e-4)
    assert_close_rel(run_float(optimize(g), x)[g.outputs[0]], ref, 1e-4)
    if exporter == "dynamo23":
        assert "Attention" in {n.op_type for n in model.graph.node}


#: int8 on fsim against onnxruntime's float output, with synthetic calibration.
COSINE = 0.99
INT8_CASES = [(m, e) for m in ("bert", "gpt", "vit", "swin") for e in ("ts", "dynamo")] + \
    [("gpt_sdpa", "dynamo23"), ("mask_additive", "ts")]


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("name, exporter", INT8_CASES,
                         ids=[f"{m}-{e}" for m, e in INT8_CASES])
def test_int8_on_fsim(name: str, exporter: str) -> None:
    """Compiled with synthetic calibration (token ids below each table's size, 0/1 padding
    masks), run on fsim: bit-exact with the int8 reference (the CPU layers as its numpy
    kernels: ``host="numpy"``; the LLVM ones differ in the last bits of float ops such as the
    pooler's tanh), close to onnxruntime. Both attention products and every (1, T, C)
    residual add run on VTA; the summary's MACs are the ONNX graph's, and its VTA share is
    all of them but the ViT's patch convolution (a light first conv stays float)."""
    model = export(name, exporter)
    g = from_onnx(model)
    m = compile_graph(g, Config(), CompileOptions(host="numpy"), jobs=1)
    x = _inputs(name, 2)
    with Executor(m, "fsim") as ex:
        out = ex.run(x)[g.outputs[0]]
        ran = {r.node: r.where for r in ex.last_report.layers}
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)[g.outputs[0]])
    (ref,) = run_ort(model, x)
    assert cosine(out, ref) >= COSINE
    products = [n.name for n in m.graph.nodes if n.op == "QMatMul"]
    assert len(products) == (4 if name == "swin" else 2)  # Swin: two blocks
    assert all(ran[p] == "fsim" for p in products)
    assert softmax_path(m.graph) == ["QMatMul", "QSoftmax", "QMatMul"]
    # between two VTA layers, float ops (a Dequantize ... Quantize island) hold no Softmax, and
    # a LayerNorm only where the calibration rule keeps its input, the residual stream, float
    lossy = {i.node for i in m.layers if "LayerNorm reads it" in (i.float_reason or "")}
    for island in float_islands(m):
        ops_ = {m.graph.node(k).op for k in island}
        assert "Softmax" not in ops_, island
        assert "LayerNormalization" not in ops_ or lossy & island, island
    if name == "bert":  # post-norm: every LayerNorm after the embeddings reads int8
        assert [n.op for n in m.graph.nodes].count("QLayerNorm") == 2
    # a (1, T, C) residual add: on the ALU, or fused into its Dense's epilogue (``residual``)
    residual = [n.name for n in m.graph.nodes
                if (n.op == "QAdd" and len(m.shapes[n.inputs[0]]) == 3) or "residual" in n.attrs]
    assert all(ran[r] == "fsim" for r in residual)
    assert residual or name == "mask_additive"  # its block has no residual add
    total = onnx_macs(model, x)
    assert sum(m.macs.values()) == total
    on_vta = sum(v for k, v in m.macs.items() if m.partition.get(k) == "vta")
    assert on_vta == total - (onnx_macs(model, x, ("Conv",)) if name in ("vit", "swin") else 0)
    from vta.compiler.graph.summary import compile_summary

    assert f"on VTA: {on_vta / total * 100:.1f}% of" in compile_summary(m, "out")


def float_islands(m) -> list[set[str]]:  # noqa: ANN001 - a CompiledModule
    """The float nodes between two VTA layers: for each ``Quantize`` whose output a VTA layer
    reads (through shape ops), the nodes back to a ``Dequantize`` of a VTA layer's output."""
    from vta.compiler import ops

    g, vta = m.graph, {k for k, v in m.partition.items() if v == "vta"}
    prod, cons = g.producers(), g.consumers()

    def passes(n) -> bool:  # noqa: ANN001
        return ops.has(n.op, "moves") or ops.has(n.op, "selecting") or n.op == "Identity"

    def from_vta(t: str) -> bool:
        n = prod.get(t)
        return n is not None and (n.name in vta or (passes(n) and from_vta(n.inputs[0])))

    def to_vta(t: str) -> bool:
        return any(c.name in vta or (passes(c) and to_vta(c.outputs[0]))
                   for c in cons.get(t, []))

    out = []
    for q in g.nodes:
        if q.op != "Quantize" or not to_vta(q.outputs[0]):
            continue
        island, todo, reached = set(), [q.inputs[0]], False
        while todo:
            n = prod.get(todo.pop())
            if n is None or n.name in island:
                continue
            if n.op == "Dequantize":
                reached |= from_vta(n.inputs[0])
                continue
            island.add(n.name)
            todo += [i for i in n.inputs if i and i not in g.params]
        if reached:
            out.append(island)
    return out


def softmax_path(g) -> list[str]:  # noqa: ANN001 - a Graph
    """The ops from the Q·Kᵀ product to the softmax·V one, shape ops and ``Identity`` (a
    scale folded in) left out: ``QMatMul, QSoftmax, QMatMul`` when the softmax and its masks
    run as one int8 kernel with no Dequantize/Quantize between the two VTA layers."""
    from vta.compiler import ops

    prod = g.producers()
    pv = [n for n in g.nodes if n.op == "QMatMul"][-1]  # softmax·V, after Q·Kᵀ
    path, t = [pv.op], pv.inputs[0]
    while t in prod:
        n = prod[t]
        if not (ops.has(n.op, "moves") or n.op == "Identity"):
            path.append(n.op)
            if n.op == "QMatMul":
                break
        t = n.inputs[0]
    return path[::-1]


def onnx_macs(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
              ops: tuple[str, ...] = ("Conv", "Gemm", "MatMul", "Attention")) -> int:
    """Multiply-accumulates of the model's ``ops`` nodes (Conv, Gemm, MatMul and Attention),
    from ONNX's own shape inference at the inputs' shapes (an independent count of what the
    kit's summary reports)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in feeds:
            dims = vi.type.tensor_type.shape.dim
            for d, size in zip(dims, feeds[vi.name].shape):
                d.Clear()
                d.dim_value = size
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in [*m.graph.value_info, *m.graph.input, *m.graph.output]}
    shapes.update({t.name: list(t.dims) for t in m.graph.initializer})
    total = 0
    for n in m.graph.node:
        if n.op_type not in ops:
            continue
        if n.op_type == "Attention":  # Q·Kᵀ and softmax·V of [B, H, S, D] operands
            (b, h, sq, d), skv = shapes[n.input[0]], shapes[n.input[1]][2]
            total += 2 * b * h * sq * skv * d
            continue
        out = math.prod(shapes[n.output[0]])
        if n.op_type == "Conv":
            total += out * math.prod(shapes[n.input[1]][1:])
        else:
            a = shapes[n.input[0]]
            trans_a = any(at.name == "transA" and at.i for at in n.attribute)
            total += out * (a[0] if trans_a else a[-1])
    return total


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt", "vit"])
def test_every_product_on_vta(name: str) -> None:
    """Q·Kᵀ and softmax·V (two activations, ``QMatMul``) count in the MACs, 2·T·T·D of them,
    and run on VTA with every Dense layer: with the ViT's patch convolution quantized too
    (``keep_first_float=False``), 100% of the ONNX graph's MACs are on VTA."""
    model = export(name, "dynamo")
    m = compile_graph(from_onnx(model), Config(), CompileOptions(keep_first_float=False), jobs=1)
    products = sum(v for k, v in m.macs.items() if m.graph.node(k).op == "QMatMul")
    tokens = T if name == "gpt" else 17
    assert products == 2 * tokens * tokens * D
    total = onnx_macs(model, _inputs(name))
    on_vta = sum(v for k, v in m.macs.items() if m.partition.get(k) == "vta")
    assert on_vta == total
    from vta.compiler.graph.summary import compile_summary

    assert "on VTA: 100.0% of" in compile_summary(m, "out")


@pytest.mark.slow
@pytest.mark.sim
def test_matmul_workload_tuned_and_compiled_in(tmp_path, capsys) -> None:
    """`vta tune --workload matmul:G=2,N=17,K=16,M=17` (the ViT block's Q·Kᵀ: 2 heads, 17
    tokens, head size 16) writes a log; `vta compile --tuning-log` builds that layer with the
    log's best knobs (knob source "tuning-log") and the other product with its defaults; the
    module runs on fsim as the int8 reference."""
    from vta.compiler.graph.module import load_module
    from vta.tune.log import best_per_workload

    log = tmp_path / "t.jsonl"
    assert main(["tune", "--workload", "matmul:G=2,N=17,K=16,M=17", "--trials", "3",
                 "--log", str(log)]) == 0
    (best,) = best_per_workload(log).values()
    model = export("vit", "ts")
    p = tmp_path / "vit.onnx"
    p.write_bytes(model.SerializeToString())
    assert main(["compile", str(p), "-o", str(tmp_path / "vit.vta"), "--tuning-log",
                 str(log)]) == 0
    m = load_module(tmp_path / "vit.vta")
    qk, pv = (m.kernels[n.name] for n in m.graph.nodes if n.op == "QMatMul")
    assert (qk.template, qk.knob_source, qk.knobs) == ("matmul", "tuning-log",
                                                     dict(best.config["values"]))
    assert (pv.template, pv.knob_source) == ("matmul", "default")
    x = _inputs("vit", 3)
    with Executor(m, "fsim", host="numpy") as ex:
        out = ex.run(x)[m.graph.outputs[0]]
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)[m.graph.outputs[0]])


# ------------------------------------------------------------------ integer inputs
@pytest.mark.slow
def test_synthetic_calibration_respects_tables_and_masks() -> None:
    """ids uniform below their table's rows (token types below 2), masks 0/1 runs of ones
    (never all zero)."""
    g = from_onnx(export("bert", "dynamo"))
    assert index_bounds(g) == {"ids": VOCAB, "types": 2}
    samples = synthetic_samples(g, count=8)
    ids = np.stack([s["ids"] for s in samples])
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < VOCAB
    assert len(np.unique(ids)) > VOCAB * 0.8  # spread over the table
    assert set(np.unique([s["types"] for s in samples])) == {0, 1}
    for s in samples:
        mask = s["mask"][0]
        assert mask[0] == 1 and set(np.unique(mask)) <= {0, 1}
        assert (np.diff(mask) <= 0).all()  # ones, then padding


@pytest.mark.slow
@pytest.mark.sim
def test_token_id_outside_the_vocabulary_is_one_line(tmp_path, capsys) -> None:
    """numpy would index a table from the end with -1 (and ONNX allows it); an embedding has
    no such row: a one-line error, exit status 2 from `vta run`, no output written."""
    model = export("gpt", "ts")
    m = compile_graph(from_onnx(model), Config(), jobs=1)
    for bad in (VOCAB, -1):
        x = _inputs("gpt")
        x["ids"][0, 5] = bad
        with Executor(m, "fsim") as ex, pytest.raises(InputError) as e:
            ex.run(x)
        msg = str(e.value)
        assert "\n" not in msg and f"index {bad} at [0, 5]" in msg and f"[0, {VOCAB})" in msg
        p = tmp_path / "model.onnx"
        p.write_bytes(model.SerializeToString())
        np.savez(tmp_path / "bad.npz", ids=x["ids"])
        for target in ("cpu", "fsim"):
            capsys.readouterr()
            assert main(["run", str(p), "--input", str(tmp_path / "bad.npz"), "--target",
                         target, "-o", str(tmp_path / "y.npy")]) == 2
            err = capsys.readouterr().err.strip()  # fsim: a "compiling ..." line first
            assert "Traceback" not in err and "vocabulary size 50" in err.splitlines()[-1]
            assert err.splitlines()[-1].startswith("vta run: error: index")
            assert not (tmp_path / "y.npy").exists()


@pytest.mark.slow
@pytest.mark.sim
def test_fully_masked_row_has_no_nan() -> None:
    """An attention mask of zeros everywhere masks every key. onnxruntime's Softmax gives NaN
    for -inf rows (nn.TransformerEncoderLayer in PyTorch too); the kit's softmax gives 0
    there, as PyTorch's scaled_dot_product_attention and ONNX's Attention op do. The
    TorchScript exporter writes that rule out for SDPA (Where(IsNaN(softmax), 0, softmax)):
    the kit matches PyTorch itself and onnxruntime; the dynamo exporter at opset 18 masks with
    the lowest float instead (uniform rows, not PyTorch's 0): the kit matches onnxruntime; at
    opset 23 (Attention) it matches PyTorch and ONNX's reference implementation. With Hugging
    Face's finite additive mask it matches onnxruntime (uniform rows)."""
    zero = {"ids": _inputs("mask_bool")["ids"], "mask": np.zeros((1, T), bool)}
    torch.manual_seed(0)
    eager = BUILDERS["mask_bool"]().eval()
    with torch.no_grad():
        want = eager(*(torch.from_numpy(v) for v in zero.values())).numpy()
    assert np.isfinite(want).all()
    for exporter in ("ts", "dynamo", "dynamo23"):
        model = export("mask_bool", exporter)
        g = from_onnx(model)
        ours = run_float(g, zero)[g.outputs[0]]
        assert np.isfinite(ours).all()
        assert_close_rel(ours, reference(model, exporter, zero), 1e-4)
        if exporter != "dynamo":
            assert_close_rel(ours, want, 1e-4)
    model = export("bert", "dynamo")
    m = compile_graph(from_onnx(model), Config(), jobs=1)
    x = dict(_inputs("bert"), mask=np.zeros((1, T), np.int64))
    with Executor(m, "fsim") as ex:
        assert np.isfinite(ex.run(x)[m.graph.outputs[0]]).all()
    assert np.isnan(run_ort(model, x)[0]).all()
    model = export("mask_additive", "ts")
    g = from_onnx(model)
    x = {"ids": zero["ids"], "mask": np.zeros((1, T), np.int64)}
    assert_close_rel(run_float(g, x)[g.outputs[0]], run_ort(model, x)[0], 1e-4)


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.parametrize("exporter", ["ts", "dynamo"])
def test_dynamic_sequence_fixed_by_input_shape(tmp_path, exporter: str) -> None:
    """A symbolic sequence axis takes its length from `vta compile --input-shape`; `--calib`
    reads integer arrays; `vta run --input` an .npz of int64 ids; `vta run MODEL.onnx
    --target cpu` sizes it from the input file."""
    model = export("gpt", exporter, dynamic=True)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[1].dim_param and not dims[1].dim_value
    p = tmp_path / "gpt.onnx"
    p.write_bytes(model.SerializeToString())
    rng = np.random.default_rng(3)
    np.save(tmp_path / "calib.npy", _ids(rng, (4, 1, 12)))
    np.savez(tmp_path / "x.npz", ids=_ids(rng, (1, 12)))
    x = {"ids": np.load(tmp_path / "x.npz")["ids"]}
    (ref,) = run_ort(model, x)
    assert main(["compile", str(p), "-o", str(tmp_path / "mod"), "--input-shape", "ids=1,12",
                 "--calib", str(tmp_path / "calib.npy")]) == 0
    assert main(["run", str(tmp_path / "mod"), "--input", str(tmp_path / "x.npz"), "-o",
                 str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == ref.shape == (1, 12, VOCAB) and cosine(y, ref) >= 0.99
    assert main(["run", str(p), "--input", str(tmp_path / "x.npz"), "--target", "cpu", "-o",
                 str(tmp_path / "yc.npy")]) == 0
    assert_close_rel(np.load(tmp_path / "yc.npy"), ref, 1e-4)


def test_float_calibration_of_an_integer_input_is_one_line(tmp_path, capsys) -> None:
    from onnx import TensorProto, helper

    table = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["y"], name="emb")],
                          "emb", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                                [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])],
                          [onnx.numpy_helper.from_array(table, "table")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "emb.onnx"
    p.write_bytes(model.SerializeToString())
    np.save(tmp_path / "calib.npy", np.array([[0.5, 1, 2]]))
    assert main(["compile", str(p), "-o", str(tmp_path / "mod"), "--calib",
                 str(tmp_path / "calib.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'ids' takes int64" in err
    x = {"ids": np.array([[9, 0, 3]], np.int64)}
    np.testing.assert_array_equal(run_float(from_onnx(model), x)["y"], run_ort(model, x)[0])


def test_unsupported_op_on_ids_is_one_line() -> None:
    """RoBERTa-style position ids (a CumSum of the mask) need an op the kit does not import:
    one line naming the node and the op type."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("CumSum", ["mask", "axis"], ["pos"], name="position_ids")]
    g = helper.make_graph(nodes, "roberta", [helper.make_tensor_value_info(
        "mask", TensorProto.INT64, [1, T])], [helper.make_tensor_value_info(
            "pos", TensorProto.INT64, [1, T])], [onnx.numpy_helper.from_array(
                np.array(1, np.int64), "axis")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOpError) as e:
        from_onnx(model)
    msg = str(e.value)
    assert "\n" not in msg and "'position_ids'" in msg and "CumSum" in msg


@pytest.mark.slow
@pytest.mark.sim
def test_gpt_greedy_example_runs(capsys) -> None:
    """examples/gpt_greedy.py: greedy decoding by re-running the fixed-length model; the kit's
    float CPU path picks onnxruntime's tokens, the int8 module on fsim tokens of the
    vocabulary (its agreement with float is printed, not asserted: int8 accuracy is later)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "gpt_greedy.py"
    spec = importlib.util.spec_from_file_location("gpt_greedy", path)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--steps", "6"]) == 0
    rows = {line[:23].strip(): line[23:] for line in capsys.readouterr().out.splitlines()}
    tokens = {k: [int(t) for t in v.strip(" []").split(",")] for k, v in rows.items()
              if v.strip().startswith("[")}
    assert tokens["kit, --target cpu"] == tokens["onnxruntime (float)"]
    assert len(tokens["kit, int8 on fsim"]) == 6
    assert all(0 <= t < demo.VOCAB for t in tokens["kit, int8 on fsim"])


def test_int32_ids_positions_and_bool_mask() -> None:
    """int32 token ids and position ids into their tables, a boolean mask through Not and
    Where into an additive bias, integer Cast: the kit's float path against onnxruntime;
    synthetic calibration draws each id input below its own table's rows."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(4)
    tok = rng.standard_normal((VOCAB, 8)).astype(np.float32)
    pos = rng.standard_normal((T, 8)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["tok", "ids"], ["te"], name="tok"),
             helper.make_node("Cast", ["positions"], ["p64"], name="cast", to=TensorProto.INT64),
             helper.make_node("Gather", ["pos", "p64"], ["pe"], name="pos"),
             helper.make_node("Add", ["te", "pe"], ["x"], name="add"),
             helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
             helper.make_node("Not", ["keep"], ["drop"], name="not"),
             helper.make_node("Where", ["drop", "ninf", "zero"], ["bias"], name="where"),
             helper.make_node("Add", ["s", "bias"], ["sb"], name="masked"),
             helper.make_node("Softmax", ["sb"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(
        nodes, "emb", [helper.make_tensor_value_info("ids", TensorProto.INT32, [1, T]),
                       helper.make_tensor_value_info("positions", TensorProto.INT32, [1, T]),
                       helper.make_tensor_value_info("keep", TensorProto.BOOL, [1, 1, T])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, T])],
        [onnx.numpy_helper.from_array(a, k) for k, a in (
            ("tok", tok), ("pos", pos), ("xt", rng.standard_normal((8, T)).astype(np.float32)),
            ("ninf", np.array(-np.inf, np.float32)), ("zero", np.array(0, np.float32)))])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    kit = from_onnx(model)
    assert {k: v.dtype for k, v in kit.inputs.items()} == {"ids": "int32", "positions": "int32",
                                                          "keep": "bool"}
    assert index_bounds(kit) == {"ids": VOCAB, "positions": T}
    x = {"ids": rng.integers(0, VOCAB, (1, T)).astype(np.int32),
         "positions": np.arange(T, dtype=np.int32)[None], "keep": _padding(10).astype(bool)[None]}
    assert_close_rel(run_float(kit, x)["y"], run_ort(model, x)[0], 1e-4)
    for s in synthetic_samples(kit, count=4):
        assert s["ids"].dtype == np.int32 and s["ids"].min() >= 0 and s["ids"].max() < VOCAB
        assert s["positions"].min() >= 0 and s["positions"].max() < T
        assert s["keep"].dtype == bool and s["keep"][..., 0].all()
