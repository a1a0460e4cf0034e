"""scikit-learn's digits for the benchmarks that train a network at run time (bench_digits'
CNN, bench_transformers' ViT): the split and scaling of the images, the training loop, and
float (onnxruntime) vs VTA int8 (fsim) accuracy on the held-out images."""

from __future__ import annotations

from typing import Any

import numpy as np


def digits(size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray]:
    """Train/test split (80/20) of the digits, bilinearly upsampled to size x size and
    standardised; float32 NCHW images and int64 labels."""
    import torch
    from sklearn.datasets import load_digits
    from torch.nn import functional as F  # noqa: N812

    d = load_digits()
    x = torch.tensor(d.images[:, None], dtype=torch.float32) / 16.0
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = ((x - x.mean()) / x.std()).numpy()
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def fit(model: Any, opt: Any, xtr: np.ndarray, ytr: np.ndarray, epochs: int,
        seed: int = 0) -> None:
    """Train ``model`` with ``opt`` on cross-entropy, minibatches of 64 in an order drawn
    from ``seed``; leaves the model in training mode."""
    import torch

    x, y = torch.tensor(xtr), torch.tensor(ytr)
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(y), generator=gen).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()


def accuracies(onnx_model: str | bytes, module: Any, name: str, output: str,
               xte: np.ndarray, yte: np.ndarray) -> dict[str, float]:
    """Float (onnxruntime on ``onnx_model``) and int8 (the compiled ``module`` on fsim)
    accuracy in percent on the held-out images fed one by one as input ``name``, the drop in
    points, the share of images where the two predict the same class and the seconds the
    fsim run took."""
    import time

    import onnxruntime as ort
    from vta.compiler.graph.executor import Executor

    sess = ort.InferenceSession(onnx_model, providers=["CPUExecutionProvider"])
    f_pred = np.array([int(sess.run(None, {name: xte[k:k + 1]})[0].argmax())
                       for k in range(len(yte))])
    t0 = time.perf_counter()
    with Executor(module, "fsim") as ex:
        q_pred = np.array([int(ex.run({name: xte[k:k + 1]})[output].argmax())
                           for k in range(len(yte))])
    f_acc, q_acc = float((f_pred == yte).mean() * 100), float((q_pred == yte).mean() * 100)
    return {"float_accuracy": round(f_acc, 3), "int8_vta_accuracy": round(q_acc, 3),
            "drop_points": round(f_acc - q_acc, 3), "agree": float((f_pred == q_pred).mean()),
            "fsim_s": time.perf_counter() - t0}
