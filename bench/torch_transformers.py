"""Transformers written in PyTorch without torchvision or transformers (neither imports beside
the pinned CPU torch): a ViT, a Swin Transformer (windowed attention with its relative-position
bias, shifted windows with their mask, patch merging), a BERT-style encoder (token, position
and token-type embeddings, padding mask, tanh pooler) and a GPT-style decoder (causal
self-attention), after the published definitions of each.

One set of blocks serves two sizes: :data:`MODELS` (ViT-Ti/16, Swin-T, BERT 4x256 at 128
tokens, GPT 4x256 at 64 tokens) for ``bench/bench_transformers.py``; :data:`QUICK` (small ones)
for its ``--quick`` run and the tests. :func:`export` writes ONNX with the TorchScript
exporter.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn


class Mlp(nn.Sequential):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))


class Block(nn.Module):
    """A pre-norm encoder block with ``nn.MultiheadAttention`` (ViT, BERT and GPT with
    ``causal``)."""

    def __init__(self, d: int, heads: int, causal_len: int = 0) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = Mlp(d, 4 * d)
        mask = torch.triu(torch.full((causal_len, causal_len), float("-inf")), 1) \
            if causal_len else None
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        y = self.ln1(x)
        x = x + self.attn(y, y, y, attn_mask=self.mask, key_padding_mask=pad,
                          need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """Patch embedding, class token, position embedding, pre-norm blocks, a classifier on the
    class token (torchvision's VisionTransformer)."""

    def __init__(self, layers: int = 12, d: int = 192, heads: int = 3, patch: int = 16,
                 image: int = 224, classes: int = 1000, channels: int = 3) -> None:
        super().__init__()
        self.image, self.channels = image, channels
        self.patch = nn.Conv2d(channels, d, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x)[:, 0])

    def example(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.standard_normal((1, self.channels, self.image, self.image))
                .astype(np.float32)}


class WindowAttention(nn.Module):
    """Multi-head self-attention inside ``w x w`` windows with a learned relative-position bias
    (a table of ``(2w-1)^2`` rows per head, indexed by a constant)."""

    def __init__(self, d: int, heads: int, w: int) -> None:
        super().__init__()
        self.heads, self.scale = heads, (d // heads) ** -0.5
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.table = nn.Parameter(torch.randn((2 * w - 1) ** 2, heads) * 0.02)
        c = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
        rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + (w - 1)
        self.register_buffer("index", rel[..., 0] * (2 * w - 1) + rel[..., 1])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, c = x.shape  # b: windows
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads) \
            .permute(2, 0, 3, 1, 4)
        a = (q * self.scale) @ k.transpose(-2, -1)
        a = a + self.table[self.index].permute(2, 0, 1).unsqueeze(0)
        if mask is not None:
            a = a + mask.unsqueeze(1)  # [windows, 1, n, n]
        y = a.softmax(-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class SwinBlock(nn.Module):
    def __init__(self, d: int, heads: int, res: int, w: int, shift: int) -> None:
        super().__init__()
        self.res, self.w = res, min(w, res)
        self.shift = 0 if res <= w else shift
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = WindowAttention(d, heads, self.w)
        self.mlp = Mlp(d, 4 * d)
        mask = None
        if self.shift:  # regions of the shifted image: tokens of different ones do not attend
            img = torch.zeros(1, res, res, 1)
            cuts = (slice(0, -self.w), slice(-self.w, -self.shift), slice(-self.shift, None))
            k = 0
            for hs in cuts:
                for ws in cuts:
                    img[:, hs, ws] = k
                    k += 1
            m = self.windows(img).squeeze(-1)
            mask = (m[:, None, :] != m[:, :, None]).float() * -100.0
        self.register_buffer("mask", mask)

    def windows(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        s = self.w
        return x.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        r, s = self.res, self.w
        y = self.ln1(x).view(b, r, r, c)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        y = self.attn(self.windows(y), self.mask)
        y = y.view(b, r // s, r // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, r, r, c)
        if self.shift:
            y = torch.roll(y, (self.shift, self.shift), (1, 2))
        x = x + y.reshape(b, n, c)
        return x + self.mlp(self.ln2(x))


class PatchMerging(nn.Module):
    """2x2 neighbouring tokens concatenated (4C), LayerNorm, a Linear to 2C."""

    def __init__(self, d: int, res: int) -> None:
        super().__init__()
        self.res = res
        self.ln, self.red = nn.LayerNorm(4 * d), nn.Linear(4 * d, 2 * d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, c = x.shape
        x = x.view(b, self.res, self.res, c)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]],
                      -1)
        return self.red(self.ln(x.reshape(b, -1, 4 * c)))


class Swin(nn.Module):
    """Swin Transformer: 4x4 patches, stages of (regular, shifted) window blocks, patch
    merging between stages, mean pooling, a classifier (Swin-T: d 96, depths 2,2,6,2)."""

    def __init__(self, d: int = 96, depths: tuple[int, ...] = (2, 2, 6, 2),
                 heads: tuple[int, ...] = (3, 6, 12, 24), w: int = 7, image: int = 224,
                 classes: int = 1000) -> None:
        super().__init__()
        self.image = image
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.ln0 = nn.LayerNorm(d)
        res = image // 4
        layers: list[nn.Module] = []
        for i, (n, h) in enumerate(zip(depths, heads)):
            layers += [SwinBlock(d, h, res, w, 0 if j % 2 == 0 else w // 2) for j in range(n)]
            if i < len(depths) - 1:
                layers.append(PatchMerging(d, res))
                d, res = 2 * d, res // 2
        self.layers = nn.Sequential(*layers)
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln0(self.patch(x).flatten(2).transpose(1, 2))
        return self.head(self.ln(self.layers(x)).mean(1))

    def example(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"x": rng.standard_normal((1, 3, self.image, self.image)).astype(np.float32)}


class Bert(nn.Module):
    """Token + position + token-type embeddings, LayerNorm, pre-norm encoder blocks under a
    padding mask, a tanh pooler over the first token and a classifier."""

    def __init__(self, layers: int = 4, d: int = 256, heads: int = 4, tokens: int = 128,
                 vocab: int = 1000, classes: int = 2) -> None:
        super().__init__()
        self.tokens, self.vocab = tokens, vocab
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(tokens, d), \
            nn.Embedding(2, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.pool, self.head = nn.Linear(d, d), nn.Linear(d, classes)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor
                ) -> torch.Tensor:
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.typ(types))
        pad = mask == 0
        for b in self.blocks:
            x = b(x, pad)
        return self.head(torch.tanh(self.pool(x[:, 0])))

    def example(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        t = self.tokens
        valid = int(rng.integers(t // 2, t + 1))
        return {"ids": rng.integers(0, self.vocab, (1, t)).astype(np.int64),
                "types": (np.arange(t) >= valid // 2).astype(np.int64)[None],
                "mask": (np.arange(t) < valid).astype(np.int64)[None]}


class GPT(nn.Module):
    """Token + learned position embeddings, causal pre-norm blocks, a final LayerNorm and the
    language-model head (next-token logits of every position)."""

    def __init__(self, layers: int = 4, d: int = 256, heads: int = 4, tokens: int = 64,
                 vocab: int = 1000) -> None:
        super().__init__()
        self.tokens, self.vocab = tokens, vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, tokens, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads, tokens) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))

    def example(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"ids": rng.integers(0, self.vocab, (1, self.tokens)).astype(np.int64)}


Builder = Callable[[], nn.Module]
#: The bench's models at their published sizes (random init).
MODELS: dict[str, Builder] = {
    "vit_ti16": lambda: ViT(12, 192, 3, 16, 224),
    "swin_t": lambda: Swin(),
    "bert_4x256": lambda: Bert(4, 256, 4, 128),
    "gpt_4x256": lambda: GPT(4, 256, 4, 64),
}
#: Small models of the same blocks (``--quick`` and the tests).
QUICK: dict[str, Builder] = {
    "vit_ti16": lambda: ViT(2, 64, 2, 8, 32, classes=10),
    "swin_t": lambda: Swin(32, (2, 2), (2, 4), 4, 32, classes=10),
    "bert_4x256": lambda: Bert(2, 64, 2, 32, 100),
    "gpt_4x256": lambda: GPT(2, 64, 2, 16, 100),
}


def build(builder: Builder, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return builder().eval()


def export(model: nn.Module, feeds: dict[str, np.ndarray]) -> bytes:
    """The model as ONNX (TorchScript exporter, opset 17) for inputs like ``feeds``."""
    f = io.BytesIO()
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, f, dynamo=False, input_names=list(feeds),
                          opset_version=17)
    return f.getvalue()

