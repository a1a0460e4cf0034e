"""Greedy decoding with a GPT-style decoder on VTA: a small causal decoder (2 blocks, random
init, seeded) written in PyTorch, exported to ONNX at a fixed length, compiled for VTA, and
decoded token by token by re-running the fixed-length model (no KV cache): the prompt and
the tokens so far on the left, padding on the right, which the causal mask keeps out of the
logits read at the last real position.

    .venv/bin/python examples/gpt_greedy.py [--length 16] [--steps 8] [--target fsim]

Prints the tokens the kit's float CPU path, onnxruntime (float) and the compiled int8 module
choose, and how many of the int8 ones agree with float.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one thread is fastest

import argparse  # noqa: E402
import io  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from vta.compiler.graph.executor import Executor  # noqa: E402
from vta.compiler.graph.module import compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.compiler.graph.reference import run_float  # noqa: E402
from vta.isa import Config  # noqa: E402
from vta.sim.blas import limit_blas_threads  # noqa: E402

VOCAB, DIM, HEADS = 64, 64, 2


class Block(nn.Module):
    def __init__(self, length: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.register_buffer("causal", torch.tril(torch.ones(length, length, dtype=torch.bool)))

    def forward(self, x):  # noqa: ANN001, ANN201
        b, t, _ = x.shape
        q, k, v = (y.view(b, t, HEADS, -1).transpose(1, 2)
                   for y in self.qkv(self.ln1(x)).split(DIM, dim=-1))
        a = (q @ k.transpose(-2, -1)) / math.sqrt(DIM // HEADS)
        y = a.masked_fill(~self.causal[:t, :t], float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, DIM))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, length: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(length, DIM)
        self.blocks = nn.Sequential(Block(length), Block(length))
        self.ln, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)

    def forward(self, ids):  # noqa: ANN001, ANN201
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        return self.head(self.ln(self.blocks(x)))


def export(length: int) -> onnx.ModelProto:
    torch.manual_seed(0)
    model = TinyGPT(length).eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, length, dtype=torch.int64),), f,
                          dynamo=False, input_names=["ids"], opset_version=17)
    return onnx.load_from_string(f.getvalue())


def greedy(logits_of: Callable[[np.ndarray], np.ndarray], prompt: list[int], length: int,
           steps: int) -> list[int]:
    """``steps`` tokens after ``prompt``, each the argmax of the logits at the last real
    position of the fixed-length input (padding with token 0 after it)."""
    tokens = list(prompt)
    for _ in range(steps):
        ids = np.zeros((1, length), np.int64)
        ids[0, :len(tokens)] = tokens
        tokens.append(int(np.argmax(logits_of(ids)[0, len(tokens) - 1])))
    return tokens[len(prompt):]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=16, help="the model's fixed length")
    ap.add_argument("--steps", type=int, default=8, help="tokens to generate")
    ap.add_argument("--target", default="fsim", help="where the module runs (fsim, ...)")
    args = ap.parse_args(argv)
    limit_blas_threads(1)
    torch.set_num_threads(1)
    prompt = [5, 17, 42, 8]
    if len(prompt) + args.steps > args.length:
        ap.error(f"--steps {args.steps} after a prompt of {len(prompt)} exceed --length "
                 f"{args.length}")
    model = export(args.length)
    g = from_onnx(model)
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = g.outputs[0]
    ref = greedy(lambda ids: sess.run(None, {"ids": ids})[0], prompt, args.length, args.steps)
    cpu = greedy(lambda ids: run_float(g, {"ids": ids})[out], prompt, args.length, args.steps)
    module = compile_graph(g, Config(), jobs=1)
    with Executor(module, args.target) as ex:
        vta = greedy(lambda ids: ex.run({"ids": ids})[out], prompt, args.length, args.steps)
    print(f"prompt                 {prompt}")
    print(f"onnxruntime (float)    {ref}")
    print(f"kit, --target cpu      {cpu}")
    print(f"kit, int8 on {args.target:<9} {vta}")
    same = sum(a == b for a, b in zip(vta, ref))
    print(f"int8 tokens equal to float: {same} of {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
