"""Accuracy on a trained network: float vs VTA int8.

Trains a small CNN at run time on scikit-learn's digits (1797 8x8 images shipped with the
package, upsampled to 32x32), exports it with torch.onnx.export, compiles it with `vta
compile`'s defaults (calibrated on training images) and classifies the held-out images with
the int8 module on fsim. The reference is onnxruntime running the float ONNX model on the same
images, in the same run. Goal: at most 0.5 point of accuracy lost. Writes a JSON record under
bench/results/.

    .venv/bin/python bench/bench_digits.py [--epochs 12] [--test-images 0 (all)]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from digits_data import accuracies, digits, fit  # noqa: E402

GOAL_DROP = 0.5  # accuracy points


def small_cnn():  # noqa: ANN201 - a torch module
    from torch import nn

    def block(i: int, o: int) -> list:
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
    return nn.Sequential(*block(1, 16), nn.MaxPool2d(2), *block(16, 32), nn.MaxPool2d(2),
                         *block(32, 64), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(64, 10))


def train(xtr: np.ndarray, ytr: np.ndarray, epochs: int, seed: int = 0):  # noqa: ANN201
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = small_cnn()
    fit(model, torch.optim.Adam(model.parameters(), lr=3e-3), xtr, ytr, epochs, seed)
    # batch-norm statistics of the final weights (the running averages lag behind training)
    for mod in model.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_running_stats()
            mod.momentum = None
    x = torch.tensor(xtr)
    with torch.no_grad():
        for idx in torch.arange(len(ytr)).split(256):
            model(x[idx])
    return model.eval()


def evaluate(epochs: int = 12, test_images: int = 0, calib: int = 32, seed: int = 0,
             workdir: Path | None = None) -> dict:
    """Train, export, compile; float (onnxruntime) and int8 (VTA on fsim) accuracy on the
    held-out images (the first ``test_images`` of them; 0: all)."""
    import tempfile

    import torch
    from vta.compiler.graph.module import compile_graph
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.isa import Config

    xtr, ytr, xte, yte = digits(seed=seed)
    if test_images:
        xte, yte = xte[:test_images], yte[:test_images]
    t0 = time.perf_counter()
    model = train(xtr, ytr, epochs, seed)
    train_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        path = Path(workdir or d) / "digits_cnn.onnx"
        with torch.no_grad():
            torch.onnx.export(model, torch.tensor(xtr[:1]), str(path), opset_version=17,
                              dynamo=False, input_names=["input"])
        g = load_onnx(path)
        t0 = time.perf_counter()
        m = compile_graph(g, Config(), samples=[{"input": xtr[k:k + 1]} for k in range(calib)])
        compile_s = time.perf_counter() - t0
        acc = accuracies(path.read_bytes(), m, "input", g.outputs[0], xte, yte)
    return {"train_images": len(ytr), "test_images": len(yte), "epochs": epochs,
            "calibration_images": calib, **acc, "train_s": round(train_s, 2),
            "compile_s": round(compile_s, 2), "fsim_s": round(acc["fsim_s"], 2),
            "vta_share": round(sum(v for k, v in m.macs.items() if m.partition.get(k) == "vta")
                               / max(sum(m.macs.values()), 1), 4)}


def main() -> int:
    from vta.sim.blas import limit_blas_threads

    limit_blas_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--test-images", type=int, default=0, help="0: all 360")
    args = ap.parse_args()
    r = evaluate(args.epochs, args.test_images)
    print(f"digits CNN, {r['test_images']} held-out images: float (onnxruntime) "
          f"{r['float_accuracy']:.2f}%, VTA int8 (fsim) {r['int8_vta_accuracy']:.2f}%, drop "
          f"{r['drop_points']:.2f} points (goal <= {GOAL_DROP}); predictions agree on "
          f"{r['agree'] * 100:.1f}%; {r['vta_share'] * 100:.1f}% of MACs on VTA")
    from record import write_record

    figures = {k: v for k, v in r.items() if k != "float_accuracy"}
    write_record("bench_digits", figures,
                 {"what": "onnxruntime float on the same held-out images",
                  "float_accuracy": r["float_accuracy"]},
                 params={"epochs": args.epochs, "test_images": args.test_images,
                         "goal_drop_points": GOAL_DROP})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
