"""ResNet-18 end to end: build the zoo model, compile it for VTA, run one image on the
functional simulator and compare with the float CPU run.

    .venv/bin/python examples/resnet18_demo.py [--image-size 224] [--target fsim]

Prints the top-5 classes of both runs, the time per layer and their agreement (cosine
similarity of the logits, top-1 match).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: one thread is fastest

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from vta.compiler.graph import zoo  # noqa: E402
from vta.compiler.graph.executor import Executor, progress_printer  # noqa: E402
from vta.compiler.graph.module import compile_graph, load_module  # noqa: E402
from vta.compiler.graph.onnx_frontend import load_onnx  # noqa: E402
from vta.compiler.graph.reference import run_float  # noqa: E402
from vta.isa import Config  # noqa: E402
from vta.sim.blas import limit_blas_threads  # noqa: E402


def top5(logits: np.ndarray) -> list[tuple[int, float]]:
    z = logits.reshape(-1).astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    idx = np.argsort(-z)[:5]
    return [(int(i), float(p[i])) for i in idx]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--target", default="fsim", choices=("fsim", "tsim", "perf", "cpu"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    limit_blas_threads(1)
    cfg = Config()
    with tempfile.TemporaryDirectory(prefix="vta-demo-") as tmp:
        model_path = Path(tmp) / "resnet18.onnx"
        t0 = time.perf_counter()
        model_path.write_bytes(zoo.build("resnet18", image_size=args.image_size,
                                         seed=args.seed).SerializeToString())
        graph = load_onnx(model_path)
        print(f"ResNet-18 ({args.image_size}x{args.image_size}) built and imported in "
              f"{time.perf_counter() - t0:.2f} s: {len(graph.nodes)} ONNX nodes")
        rng = np.random.default_rng(1234)
        calib = [{"input": rng.standard_normal((1, 3, args.image_size, args.image_size))
                  .astype(np.float32)} for _ in range(4)]
        image = rng.standard_normal((1, 3, args.image_size, args.image_size)).astype(np.float32)
        t0 = time.perf_counter()
        module = compile_graph(graph, cfg, samples=calib)
        module.save(Path(tmp) / "resnet18.vta")
        module = load_module(Path(tmp) / "resnet18.vta")
        t_compile = time.perf_counter() - t0
        nv = sum(v == "vta" for v in module.partition.values())
        print(f"compiled in {t_compile:.2f} s: {len(module.graph.nodes)} layers, {nv} on VTA, "
              f"{sum(k.insns for k in module.kernels.values())} VTA instructions, DRAM arena "
              f"{module.plan.size / 2**20:.1f} MiB")
        t0 = time.perf_counter()
        ref = run_float(graph, {"input": image})[graph.outputs[0]]
        t_float = time.perf_counter() - t0
        with Executor(module, args.target, progress=progress_printer()) as ex:
            out = ex.run({"input": image})[graph.outputs[0]]
            report = ex.last_report
    print()
    print(report.format(cfg))
    print()
    print(f"float CPU run: {t_float * 1e3:.1f} ms; {args.target} run: "
          f"{report.seconds * 1e3:.1f} ms")
    print(f"{'rank':<5} {'VTA (' + args.target + ')':<24} {'float CPU':<24}")
    for k, ((ci, cp), (fi, fp)) in enumerate(zip(top5(out), top5(ref)), start=1):
        print(f"{k:<5} class {ci:<4} p={cp:.3f}{'':7} class {fi:<4} p={fp:.3f}")
    a, b = out.reshape(-1).astype(np.float64), ref.reshape(-1).astype(np.float64)
    cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    same = int(a.argmax()) == int(b.argmax())
    print(f"agreement with the float CPU run: cosine similarity {cos:.4f}, top-1 "
          f"{'match' if same else 'MISMATCH'}")
    return 0 if cos > 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
