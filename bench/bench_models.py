"""Bring-your-own-model benchmark: the deployed classification families (and a YOLO-style
detector) written in PyTorch (bench/torch_families.py), exported with torch.onnx.export, then
`vta compile`'s defaults and a run on fsim.

For each family at 224x224 (random weights, batch-norm statistics re-estimated on random
inputs): does it import; share of MACs on VTA (goal >= 90%); int8 on fsim against onnxruntime
running the float ONNX model on the same input (the reference, measured in the same run):
cosine (goal >= 0.99) and the same top-1 (with the relative gap between the reference's two
largest outputs: top-1 of random weights is fragile when it is small); compile seconds (goal
<= 10 s; each family with an empty knob cache of its own, as a first compile on a new machine);
and whether fsim's int8 output equals the numpy int8 reference bit for bit (the CPU
layers run their numpy kernels here: LLVM's float kernels differ in the last bits). The
"floor" column is the cosine of the float model with uniform noise of one int8 step (the
compiled module's scale of each tensor) on every tensor the int8 graph quantizes: what
rounding alone costs that network, computed in the same run; "floor/2" the same with half that
noise (activations with one more bit): a family below the goal whose floor/2 clears it loses its
cosine to the rounding of 8-bit activations, amplified layer after layer, not to a choice of
scales; "floor top-1" how many of three draws of that noise keep the float top-1 (a family
whose draws lose it loses it to rounding alone); "w only" and "a only" split the int8 error
into its sources: the float model with the int8 weights alone, and with float weights and
every quantized tensor clipped and rounded (deterministically) alone. Writes a JSON record
under bench/results/.

    .venv/bin/python bench/bench_models.py [--families resnet18,vgg11] [--size 224]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

GOALS = {"vta_share": 0.90, "cosine": 0.99, "compile_s": 10.0}
#: Noise draws of the rounding floor whose top-1 is counted ("floor top-1": how many keep the
#: float top-1; the floor's cosine is the first draw's).
FLOOR_DRAWS = 3


def export(name: str, size: int, path: Path) -> None:
    import torch_families

    model = torch_families.build(name, size=size)
    path.write_bytes(torch_families.export(model, size, dynamo=False, opset=17))


def ort_float(path: Path, x: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


def _cache_entries() -> int:
    from vta.isa.fileio import user_cache_dir

    return len(list(user_cache_dir("knobs").glob("*.json")))


def _cpu_s() -> float:
    """CPU seconds of this process and of its reaped children (the compile's workers)."""
    import resource

    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(name: str, size: int, workdir: Path, jobs: int | None = None) -> dict:
    """One family: import, compile, fsim run, agreement with onnxruntime float."""
    from vta.compiler.graph.executor import Executor
    from vta.compiler.graph.int8_executor import run_quantized
    from vta.compiler.graph.module import compile_graph
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.compiler.graph.passes import optimize
    from vta.compiler.graph.quant_error import agreement
    from vta.compiler.graph.reference import run_float
    from vta.isa import Config, VTAError

    path = workdir / f"{name}.onnx"
    # a cold compile: an empty knob cache of its own (no entries from the families before)
    os.environ["VTA_CACHE_DIR"] = str(workdir / f"{name}.cache")
    try:
        export(name, size, path)
    except Exception as e:  # noqa: BLE001 - the exporter raises many types; keep the other rows
        return {"family": name, "imports": False, "error": f"export: {str(e).splitlines()[0]}"}
    x = np.random.default_rng(100).standard_normal((1, 3, size, size)).astype(np.float32)
    t0 = time.perf_counter()
    ref = ort_float(path, x)
    rec: dict = {"family": name, "ort_float_s": round(time.perf_counter() - t0, 3)}
    try:
        g = load_onnx(path)
    except VTAError as e:
        return rec | {"imports": False, "error": str(e).splitlines()[0]}
    rec["imports"] = True
    try:
        before = _cache_entries()
        t0, c0 = time.perf_counter(), _cpu_s()
        m = compile_graph(g, Config(), jobs=jobs)
        rec["compile_s"] = round(time.perf_counter() - t0, 2)
        rec["compile_cpu_s"] = round(_cpu_s() - c0, 2)  # its worker processes' included
        # default-knob searches this compile ran (0: every layer's knobs were in the cache)
        rec["knob_searches"] = _cache_entries() - before
    except VTAError as e:
        return rec | {"error": f"compile: {str(e).splitlines()[0]}"}
    macs = sum(m.macs.values())
    rec["gmacs"] = round(macs / 1e9, 3)
    rec["vta_share"] = round(sum(v for k, v in m.macs.items() if m.partition.get(k) == "vta")
                             / max(macs, 1), 4)
    rec["fallbacks"] = sum(n.startswith("fallback: ") for n in m.notes)
    t0 = time.perf_counter()
    # numpy host kernels, the int8 reference's own: bit_exact then checks the VTA layers (an
    # LLVM float conv, e.g. a light first conv kept float, rounds differently in the last bit)
    with Executor(m, "fsim", host="numpy") as ex:
        outs = ex.run({next(iter(g.inputs)): x})
    rec["fsim_s"] = round(time.perf_counter() - t0, 2)
    spec = run_quantized(m.graph, {next(iter(g.inputs)): x})
    rec["bit_exact"] = all(np.array_equal(outs[o], spec[o]) for o in g.outputs)
    agr = [agreement(r, outs[o]) for r, o in zip(ref, g.outputs)]
    rec["cosine"] = round(min(a["cosine"] for a in agr), 5)
    rec["top1"] = agr[0]["top1"]
    # how close the float reference's two largest outputs are (top-1 is fragile below ~3%)
    top = np.sort(ref[0].ravel())[-2:]
    rec["top2_gap"] = round(float((top[1] - top[0]) / max(abs(top[1]), 1e-30)), 4)
    og, feeds = optimize(g), {next(iter(g.inputs)): x}
    fl = run_float(og, feeds)[og.outputs[0]]  # the float model the noisy runs compare with
    draws = [rounding_floor(og, m.scales, feeds, fl, seed) for seed in range(FLOOR_DRAWS)]
    rec["rounding_floor"] = round(draws[0]["cosine"], 5)
    rec["floor_top1_kept"] = sum(bool(d["top1"]) for d in draws)
    rec["rounding_floor_half"] = round(
        rounding_floor(og, m.scales, feeds, fl, step=0.5)["cosine"], 5)
    rec |= {k: round(v, 5) for k, v in error_sources(og, m.scales, feeds, fl).items()}
    return rec


def scale_key(scales: dict, t: str) -> str | None:
    """The quantized graph's name for float tensor ``t`` (a CPU op's output gets a ``.q``, a
    graph output an ``.int8``), None when the int8 graph does not quantize it."""
    return next((k for k in (t, f"{t}.q", f"{t}.int8") if k in scales), None)


def perturbed_run(og, feeds: dict, scales: dict, perturb=None,  # noqa: ANN001
                  weights: dict | None = None) -> np.ndarray:
    """The float model's output with ``weights`` in place of its parameters of those names and
    ``perturb(key, y)`` applied to every tensor the int8 graph quantizes (``key``: its name
    there, see :func:`scale_key`)."""
    from vta.compiler import ops

    env = dict(og.params) | dict(feeds) | (weights or {})
    for n in og.nodes:
        y = ops.get(n.op).float_kernel(n, [env[i] if i else None for i in n.inputs])[0]
        key = scale_key(scales, n.outputs[0])
        if perturb is not None and key is not None:
            y = perturb(key, y).astype(np.float32)
        env[n.outputs[0]] = y
    return env[og.outputs[0]]


def error_sources(og, scales: dict, feeds: dict, fl: np.ndarray  # noqa: ANN001
                  ) -> dict[str, float]:
    """Cosine against the float output ``fl`` of the float model with one source of the int8
    error alone, the compiled module's quantization (``scales``: its scales, checked):
    ``weights_only``, the int8 weights (with their scales) and float activations;
    ``activations_only``, float weights and every tensor the int8 graph quantizes clipped to
    its int8 range and rounded to its scale."""
    from vta.compiler.graph.calibration import synthetic_samples
    from vta.compiler.graph.quant_error import agreement
    from vta.compiler.graph.quantize import quantize_graph

    qr = quantize_graph(og, synthetic_samples(og))  # as compile_graph's defaults: the offsets
    if qr.scales != scales:
        raise ValueError("the quantization differs from the compiled module's")
    qnodes = {n.name: n for n in qr.graph.nodes if n.op in ("QConv", "QDense")}
    weights = {}
    for n in og.nodes:
        q = qnodes.get(n.name)
        if q is None:
            continue
        w, wf = qr.graph.params[q.inputs[1]], og.params[n.inputs[1]]
        if w.shape != wf.shape:
            raise ValueError(f"{n.name}: int8 weights {w.shape} against float {wf.shape}")
        s = np.asarray(q.attrs["w_scale"], dtype=np.float64)
        s = s.reshape((-1,) + (1,) * (w.ndim - 1)) if s.ndim else s
        weights[n.inputs[1]] = (w * s).astype(np.float32)

    def rounded(key: str, y: np.ndarray) -> np.ndarray:
        s, off = qr.scales[key], qr.offsets.get(key, 0)
        return np.clip(np.round(y / s), -128 + off, 127 + off) * s

    return {"weights_only": agreement(fl, perturbed_run(og, feeds, scales, None, weights)
                                      )["cosine"],
            "activations_only": agreement(fl, perturbed_run(og, feeds, scales, rounded)
                                          )["cosine"]}


def rounding_floor(og, scales: dict, feeds: dict, fl: np.ndarray,  # noqa: ANN001
                   seed: int = 0, step: float = 1.0) -> dict:
    """Agreement (cosine, top-1) with the float output ``fl`` of the float model with uniform
    noise of one int8 step (the quantized graph's scale of each tensor; ``step`` of them)
    added to every tensor the int8 graph quantizes: what rounding alone costs this network,
    the floor the int8 cosine sits near; ``seed`` draws the noise."""
    from vta.compiler.graph.quant_error import agreement

    rng = np.random.default_rng(seed)

    def noise(key: str, y: np.ndarray) -> np.ndarray:
        h = scales[key] * step / 2
        return y + rng.uniform(-h, h, y.shape)

    return agreement(fl, perturbed_run(og, feeds, scales, noise))


def floor_top1(r: dict) -> str:
    """How many of the rounding floor's noise draws keep the float top-1."""
    return f"{r['floor_top1_kept']}/{FLOOR_DRAWS} same"


def table(rows: list[dict]) -> str:
    head = (f"{'family':<20} {'imports':>7} {'GMACs':>6} {'on VTA':>7} {'cosine':>8} {'floor':>7} "
            f"{'floor/2':>7} {'w only':>7} {'a only':>7} {'top-1':>6} {'floor top-1':>11} "
            f"{'gap':>6} {'compile s':>9} "
            f"{'(cpu s)':>7} {'fsim s':>7} {'bit-exact':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if not r.get("imports") or "cosine" not in r:
            lines.append(f"{r['family']:<20} {'yes' if r.get('imports') else 'NO':>7}  "
                         f"{r.get('error', '')[:150]}")
            continue
        lines.append(f"{r['family']:<20} {'yes':>7} {r['gmacs']:>6.2f} "
                     f"{r['vta_share'] * 100:>6.1f}% {r['cosine']:>8.4f} "
                     f"{r['rounding_floor']:>7.4f} {r['rounding_floor_half']:>7.4f} "
                     f"{r['weights_only']:>7.4f} {r['activations_only']:>7.4f} "
                     f"{'same' if r['top1'] else 'DIFF':>6} {floor_top1(r):>11} "
                     f"{r['top2_gap']:>6.1%} "
                     f"{r['compile_s']:>9.2f} "
                     f"{r['compile_cpu_s']:>7.2f} "
                     f"{r['fsim_s']:>7.2f} {'yes' if r['bit_exact'] else 'NO':>9}")
    ok = [r for r in rows if "cosine" in r]
    lines.append("-" * len(head))

    def met(key: str, goal: float, below: bool = False) -> int:
        return sum((r[key] <= goal) if below else (r[key] >= goal) for r in ok)
    lines.append(
        f"{len([r for r in rows if r.get('imports')])}/{len(rows)} import; goals met (of "
        f"{len(ok)} compiled): share >= {GOALS['vta_share']:.0%}: "
        f"{met('vta_share', GOALS['vta_share'])}, cosine >= {GOALS['cosine']}: "
        f"{met('cosine', GOALS['cosine'])}, same top-1: {sum(r['top1'] for r in ok)}, "
        f"compile <= {GOALS['compile_s']:g} s: {met('compile_s', GOALS['compile_s'], True)} "
        f"wall, {met('compile_cpu_s', GOALS['compile_s'], True)} cpu; reference: onnxruntime "
        f"float on the same input (gap: its top-2 outputs' relative difference; floor: "
        f"float with one int8 step of uniform noise on every quantized tensor (floor top-1: "
        f"of {FLOOR_DRAWS} noise draws); floor/2: half a step; w only / a only: float with "
        f"the int8 weights alone / with the activations alone clipped and rounded)")
    return "\n".join(lines)


def main() -> int:
    import torch_families
    from vta.sim.blas import limit_blas_threads

    limit_blas_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default=",".join(torch_families.FAMILIES))
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--jobs", type=int, default=None,
                    help="compile_graph's worker processes (default: the CPUs available)")
    args = ap.parse_args()
    names = args.families.split(",")
    unknown = set(names) - set(torch_families.FAMILIES)
    if unknown:
        ap.error(f"unknown families {sorted(unknown)}; known: {', '.join(torch_families.FAMILIES)}")
    import onnxruntime
    import torch
    from record import write_record

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            print(f"{name} ...", file=sys.stderr, flush=True)
            rows.append(measure(name, args.size, Path(d), args.jobs))
    print(table(rows))
    figures = {"families": {r["family"]: {k: v for k, v in r.items()
                                          if k not in ("family", "ort_float_s")} for r in rows},
               "goals": GOALS}
    reference = {"what": "onnxruntime float on the same input (cosine, top-1 against it)",
                 "onnxruntime": onnxruntime.__version__,
                 "ort_float_s": {r["family"]: r.get("ort_float_s") for r in rows}}
    write_record("bench_models", figures, reference,
                 params={"size": args.size, "families": names, "config": "default (1x16x16)",
                         "torch": torch.__version__, "jobs": args.jobs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
