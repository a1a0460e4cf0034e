"""Attention's matrix products on VTA against the same products on the CPU, in one run.

A ViT-Ti/16 encoder block written here in PyTorch (hidden 192, 3 heads, 197 tokens, MLP 768,
pre-norm, ``nn.MultiheadAttention``; random init, seed 0), exported with the TorchScript
exporter and compiled twice (default config, synthetic calibration): with Q·Kᵀ and softmax·V
(``QMatMul``) on VTA, and with them on the CPU (the reference: ``vta_ops`` without
``QMatMul``, as before they had a template). Per module: the share of the block's MACs on VTA
(the compile summary's), the VTA layers' perf-model cycles and ms at the board's clock; the
two products' cycles on VTA, and their int8 kernels' wall time on this machine's CPU (best of
``--repeat`` runs). With ``--check`` the VTA module runs on fsim, bit-exact against the int8
reference, and its cosine against onnxruntime's float output is recorded. Writes its record
with bench/record.py.

    .venv/bin/python bench/bench_attention.py [--board pynq-z1] [--repeat 3] [--check]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from record import write_record  # noqa: E402
from vta.boards import get_board  # noqa: E402
from vta.compiler.graph.executor import Executor  # noqa: E402
from vta.compiler.graph.module import LOWERED_OPS, compile_graph  # noqa: E402
from vta.compiler.graph.onnx_frontend import from_onnx  # noqa: E402
from vta.compiler.graph.quantize import run_quantized  # noqa: E402
from vta.isa import Config  # noqa: E402

nn = torch.nn
HIDDEN, HEADS, TOKENS, MLP = 192, 3, 197, 768


class Block(nn.Module):
    """A pre-norm ViT encoder block over (1, TOKENS, HIDDEN) tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.attn = nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(HIDDEN, MLP), nn.GELU(), nn.Linear(MLP, HIDDEN))

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.ln1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def export() -> onnx.ModelProto:
    torch.manual_seed(0)
    model = Block().eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(1, TOKENS, HIDDEN),), f, dynamo=False,
                          input_names=["x"], opset_version=17)
    return onnx.load_from_string(f.getvalue())


def summary(m, clock_mhz: float) -> dict:  # noqa: ANN001
    total = sum(m.macs.values())
    on_vta = sum(v for k, v in m.macs.items() if m.partition.get(k) == "vta")
    cycles = sum(k.cycles for k in m.kernels.values())
    products = [n.name for n in m.graph.nodes if n.op == "QMatMul"]
    prod_cycles = sum(m.kernels[k].cycles for k in products if k in m.kernels)
    return {"vta_mac_pct": round(on_vta / total * 100, 1), "gmacs": round(total / 1e9, 4),
            "vta_layers": len(m.kernels), "vta_cycles": round(cycles),
            "vta_ms": round(cycles / (clock_mhz * 1e3), 3),
            "products_cycles": round(prod_cycles),
            "products_vta_ms": round(prod_cycles / (clock_mhz * 1e3), 3),
            "compile_s": round(m.compile_seconds, 2)}


def host_ms(m, x: dict, names: list[str], repeat: int) -> float:  # noqa: ANN001
    """Best wall time (ms) over ``repeat`` runs of layers ``names`` on the CPU."""
    best = {k: float("inf") for k in names}
    with Executor(m, "perf") as ex:
        for _ in range(repeat):
            ex.run(x)
            for r in ex.last_report.layers:
                if r.node in best:
                    best[r.node] = min(best[r.node], r.seconds)
    return round(sum(best.values()) * 1e3, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="pynq-z1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    cfg = Config()
    clock = get_board(args.board).clock_mhz
    model = export()
    graph = from_onnx(model)
    x = {"x": np.random.default_rng(1).standard_normal((1, TOKENS, HIDDEN)).astype(np.float32)}
    t0 = time.perf_counter()
    on_vta = compile_graph(graph, cfg)
    on_cpu = compile_graph(graph, cfg, vta_ops=tuple(o for o in LOWERED_OPS if o != "QMatMul"))
    products = [n.name for n in on_cpu.graph.nodes if n.op == "QMatMul"]
    figures = summary(on_vta, clock)
    reference = summary(on_cpu, clock)
    reference["products_host_ms"] = host_ms(on_cpu, x, products, args.repeat)
    if args.check:
        with Executor(on_vta, "fsim", host="numpy") as ex:
            out = ex.run(x)[graph.outputs[0]]
        figures["bit_exact_fsim"] = bool(np.array_equal(
            out, run_quantized(on_vta.graph, x)[graph.outputs[0]]))
        import onnxruntime as ort

        ref = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, x)[0]
        a, b = out.ravel().astype(np.float64), ref.ravel().astype(np.float64)
        figures["cosine_vs_onnxruntime"] = round(float(a @ b / np.linalg.norm(a)
                                                       / np.linalg.norm(b)), 5)
    print(f"ViT-Ti/16 block ({TOKENS} tokens, hidden {HIDDEN}, {HEADS} heads), "
          f"{figures['gmacs']} GMACs, {args.board} at {clock} MHz")
    for what, r in (("products on VTA", figures), ("products on CPU (ref)", reference)):
        print(f"  {what:<22} {r['vta_mac_pct']:>5.1f}% of MACs on VTA, {r['vta_layers']} VTA "
              f"layers, {r['vta_cycles']} cycles = {r['vta_ms']} ms")
    print(f"  Q·Kᵀ + softmax·V: {figures['products_cycles']} cycles = "
          f"{figures['products_vta_ms']} ms on VTA; {reference['products_host_ms']} ms as int8 "
          f"kernels on this CPU")
    if args.check:
        print(f"  fsim bit-exact {figures['bit_exact_fsim']}, cosine vs onnxruntime "
              f"{figures['cosine_vs_onnxruntime']}")
    print(f"  ({time.perf_counter() - t0:.1f} s)")
    write_record("bench_attention", figures, reference,
                 params={"board": args.board, "repeat": args.repeat, "check": args.check,
                         "block": {"hidden": HIDDEN, "heads": HEADS, "tokens": TOKENS,
                                   "mlp": MLP}})


if __name__ == "__main__":
    main()
