"""CPU (LLVM) kernels of vta.compiler.topi.cpu against numpy on the same machine.

Prints the median time of each kernel and of its numpy reference (element-wise and pooling:
plain numpy; dense and conv2d: numpy + BLAS via ``@``, conv2d as im2col + matmul), and the ratio
numpy_time / our_time (>= 1 means at least numpy's speed). Results are checked for agreement.

Fairness: same dtype (float32) on both sides; both write into a preallocated output ("into
out") or both allocate their result ("new array"); BLAS limited to one thread, as the generated
code is single-threaded; where numpy has several reasonable spellings (pooling), every one is
timed and the fastest is the reference. Samples of ours and of the reference alternate, each
sample times enough calls to last about a millisecond, and the median of ``--repeat`` samples
is reported. Time is the CPU time of the calling thread (both sides run single-threaded), so
time slices lost to other processes on a shared machine do not count; ``--wall`` measures
wall-clock time instead.

The second table is the CPU operators of the zoo's networks at full size as `vta run` runs them
(vta.compiler.graph.host: the LLVM kernel JIT-compiled from the module's IR) against the numpy
kernel each replaces (`--host numpy`), on the node's real input; integer kernels must agree
exactly, float ones within the tolerance of tests/graph/test_graph_host.py. Goal: every LLVM
kernel at least numpy's speed. Both tables go into one record under bench/results/.

    .venv/bin/python bench/bench_compiler_cpu.py [--repeat 31] [--blas-threads N] [--wall]
        [--networks resnet18,mobilenet_v1,dcgan] [--only kernels|networks]

(--blas-threads must be set before numpy loads BLAS, so it is read from the command line
before numpy is imported.)
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":
    _n = "1"
    if "--blas-threads" in sys.argv:
        _n = sys.argv[sys.argv.index("--blas-threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, _n)

import time
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from record import write_record
from vta.compiler.topi import cpu

#: Goals (numpy time / our time): element-wise and pooling at least numpy's speed, BLAS-backed
#: kernels (dense, conv2d) within 2x of numpy + BLAS.
GOALS = {"element-wise": 1.0, "pooling": 1.0, "BLAS": 0.5}


#: the clock of the samples (set by --wall)
CLOCK = time.thread_time


def _calls_per_sample(fn: Callable[[], object], target: float = 1e-3) -> int:
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(10000, int(target / one)))


def _sample(fn: Callable[[], object], n: int) -> float:
    t0 = CLOCK()
    for _ in range(n):
        fn()
    return (CLOCK() - t0) / n


def compare(ours: Callable[[], object], refs: dict[str, Callable[[], object]],
            repeat: int) -> tuple[float, float, str]:
    """Median seconds per call of ``ours`` and of the fastest reference (and its name)."""
    fns = {"ours": ours, **refs}
    for f in fns.values():  # warm-up (JIT pages, allocator, caches)
        f()
    n = {k: _calls_per_sample(f) for k, f in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():  # interleaved
            samples[k].append(_sample(f, n[k]))
    med = {k: float(np.median(v)) for k, v in samples.items()}
    best_ref = min(refs, key=lambda k: med[k])
    return med["ours"], med[best_ref], best_ref


def np_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
    if kh == kw == 1:  # 1x1: no im2col needed
        sub = xp[:, :, ::stride, ::stride]
        cols = sub.transpose(0, 2, 3, 1).reshape(-1, c)
        out = cols @ w.reshape(o, c).T
        return out.reshape(n, sub.shape[2], sub.shape[3], o).transpose(0, 3, 1, 2)
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    oh, ow = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    out = cols @ w.reshape(o, -1).T
    return out.reshape(n, oh, ow, o).transpose(0, 3, 1, 2)


def np_maxpool_window(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    return sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s].max(axis=(-2, -1))


def np_maxpool_slices(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """Max pooling as k*k strided-slice maxima (numpy's fastest spelling)."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    oh = (xp.shape[2] - k) // s + 1
    ow = (xp.shape[3] - k) // s + 1
    out = xp[:, :, :s * (oh - 1) + 1:s, :s * (ow - 1) + 1:s].copy()
    for dy in range(k):
        for dx in range(k):
            if dy or dx:
                np.maximum(out, xp[:, :, dy:dy + s * (oh - 1) + 1:s, dx:dx + s * (ow - 1) + 1:s],
                           out=out)
    return out


def np_avgpool_slices(x: np.ndarray, k: int, s: int) -> np.ndarray:
    oh = (x.shape[2] - k) // s + 1
    ow = (x.shape[3] - k) // s + 1
    out = x[:, :, :s * (oh - 1) + 1:s, :s * (ow - 1) + 1:s].copy()
    for dy in range(k):
        for dx in range(k):
            if dy or dx:
                out += x[:, :, dy:dy + s * (oh - 1) + 1:s, dx:dx + s * (ow - 1) + 1:s]
    out *= np.float32(1.0 / (k * k))
    return out


#: allowed difference of a float LLVM host kernel (relative to the reference's largest
#: magnitude; tanh absolute), as in tests/graph/test_graph_host.py
FLOAT_TOL = {"Conv": 1e-5, "Softmax": 1e-6, "Tanh": 1e-6}


def network_ops(names: list[str], repeat: int) -> list[dict]:
    """Time every CPU node of the zoo networks with an LLVM kernel against its numpy kernel."""
    from vta.compiler.graph import zoo
    from vta.compiler.graph.host import module_host_kernels
    from vta.compiler.graph.int8_executor import run_quantized
    from vta.compiler.graph.module import compile_graph
    from vta.compiler.graph.onnx_frontend import from_onnx
    from vta.compiler.ops import kernel_for
    from vta.isa import Config

    rows = []
    print(f"\n{'network / node':44} {'op':19} {'llvm':>10}  {'numpy':>10}  numpy/llvm")
    for name in names:
        g = from_onnx(zoo.build(name))
        m = compile_graph(g, Config())
        rng = np.random.default_rng(0)
        feeds = {k: rng.standard_normal(v.shape).astype(np.float32)
                 for k, v in g.inputs.items()}
        env = run_quantized(m.graph, feeds, keep=True)
        kernels = module_host_kernels(m.graph.nodes, m.shapes, m.graph.params, m.partition,
                                      m.host_ir)
        for n in m.graph.nodes:
            if n.name not in m.host_ir:
                continue
            k = kernels[n.name]
            args = [env[i] if i else None for i in n.inputs]
            ref = kernel_for(n.op)(n, args)[0]
            got = k(args)
            if n.op in FLOAT_TOL:
                scale = 1.0 if n.op == "Tanh" else float(np.abs(ref).max())
                ok = float(np.abs(got.astype(np.float64) - ref).max()) <= FLOAT_TOL[n.op] * scale
            else:
                ok = got.dtype == ref.dtype and np.array_equal(got, ref)
            t_ours, t_ref, _ = compare(lambda k=k, a=args: k(a),
                                       {"numpy": lambda n=n, a=args: kernel_for(n.op)(n, a)},
                                       repeat)
            rows.append({"network": name, "node": n.name, "op": n.op,
                         "shape": list(m.shapes[n.inputs[0]]), "llvm_ms": t_ours * 1e3,
                         "numpy_ms": t_ref * 1e3, "ratio": t_ref / t_ours, "exact": ok
                         if n.op not in FLOAT_TOL else None, "agrees": ok})
            print(f"{name + ' / ' + n.name:44} {n.op:19} {t_ours * 1e3:7.4f} ms  "
                  f"{t_ref * 1e3:7.4f} ms  {t_ref / t_ours:6.2f}  "
                  f"{'OK' if ok else 'MISMATCH'}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=31, help="samples per kernel (median)")
    ap.add_argument("--blas-threads", default="1", help="BLAS threads for numpy (default 1)")
    ap.add_argument("--wall", action="store_true", help="wall-clock instead of thread CPU time")
    ap.add_argument("--networks", default="resnet18,mobilenet_v1,dcgan",
                    help="zoo networks (full size) whose CPU operators are timed")
    ap.add_argument("--only", choices=("kernels", "networks"),
                    help="run only the operator table or only the networks' host operators")
    args = ap.parse_args(argv)
    global CLOCK
    if args.blas_threads != "1" and not args.wall:
        print("several BLAS threads: measuring wall-clock time (thread CPU time would only "
              "count the calling thread)")
        args.wall = True
    CLOCK = time.perf_counter if args.wall else time.thread_time
    rng = np.random.default_rng(0)
    rows = []

    def case(name: str, ours: Callable, refs: dict[str, Callable], inputs: list, tol: float,
             kind: str) -> None:
        got = np.array(ours(*inputs), copy=True)
        ok = all(np.allclose(got, r(*inputs), rtol=tol, atol=tol) for r in refs.values())
        t_ours, t_ref, which = compare(lambda: ours(*inputs),
                                       {k: (lambda r=r: r(*inputs)) for k, r in refs.items()},
                                       args.repeat)
        rows.append((name, kind, t_ours, t_ref, ok))
        print(f"{name:36} {t_ours * 1e3:9.4f} ms  numpy {t_ref * 1e3:9.4f} ms  "
              f"ratio {t_ref / t_ours:6.2f}  {'OK' if ok else 'MISMATCH'}  ({kind}; {which})",
              flush=True)

    if args.only != "networks":
        kernel_table(case, rng)
    net = network_ops(args.networks.split(","), args.repeat) if args.only != "kernels" else []
    return report(args, rows, net)


def kernel_table(case: Callable, rng: np.random.Generator) -> None:
    """The operators of vta.compiler.topi.cpu against numpy spellings of the same operation."""
    print(f"{'kernel':36} {'ours':>12}  {'reference':>15}  numpy/ours   (kind; reference)")
    v = rng.standard_normal(1 << 22).astype(np.float32)
    w_ = rng.standard_normal(1 << 22).astype(np.float32)
    o = np.empty_like(v)
    add_op, relu_op = cpu.add(v.shape), cpu.relu(v.shape)
    case("add 4M float32 (into out)", lambda a, b: add_op(a, b, out=o),
         {"np.add(out=)": lambda a, b: np.add(a, b, out=o)}, [v, w_], 0, "element-wise")
    case("relu 4M float32 (into out)", lambda a: relu_op(a, out=o),
         {"np.maximum(out=)": lambda a: np.maximum(a, np.float32(0), out=o)}, [v], 0,
         "element-wise")
    case("add 4M float32 (new array)", add_op, {"np.add": np.add}, [v, w_], 0, "element-wise")
    vs, ws = v[:1 << 12].copy(), w_[:1 << 12].copy()
    os_ = np.empty_like(vs)
    add_s = cpu.add(vs.shape)
    # a microsecond-sized call shows the per-call cost (ctypes), not the kernel: reported, not
    # part of the element-wise goal
    case("add 4K float32 (into out, in cache)", lambda a, b: add_s(a, b, out=os_),
         {"np.add(out=)": lambda a, b: np.add(a, b, out=os_)}, [vs, ws], 0, "call overhead")
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    case("max_pool2d 3x3/2 pad1 64x112x112", cpu.max_pool2d(x.shape, (3, 3), (2, 2), (1, 1)),
         {"strided maxima": lambda a: np_maxpool_slices(a, 3, 2, 1),
          "sliding_window max": lambda a: np_maxpool_window(a, 3, 2, 1)}, [x], 0, "pooling")
    case("avg_pool2d 2x2/2 64x112x112", cpu.avg_pool2d(x.shape, (2, 2), (2, 2)),
         {"strided sums": lambda a: np_avgpool_slices(a, 2, 2),
          "reshape mean": lambda a: a.reshape(1, 64, 56, 2, 56, 2).mean(axis=(3, 5))},
         [x], 1e-5, "pooling")
    g = rng.standard_normal((1, 512, 7, 7)).astype(np.float32)
    case("global_avg_pool2d 512x7x7", cpu.global_avg_pool2d(g.shape),
         {"mean(2,3)": lambda a: a.mean(axis=(2, 3), keepdims=True),
          "reshape sum*k": lambda a: a.reshape(1, 512, 49).sum(-1, keepdims=True)[..., None]
          * np.float32(1 / 49)}, [g], 1e-5, "pooling")
    for batch in (1, 16):
        a = rng.standard_normal((batch, 512)).astype(np.float32)
        wt = rng.standard_normal((1000, 512)).astype(np.float32)
        case(f"dense {batch}x512 -> 1000", cpu.dense(batch, 512, 1000),
             {"x @ W.T": lambda p, q: p @ q.T}, [a, wt], 1e-3, "BLAS")
    for (c, h, o_, k, s, p) in ((64, 56, 64, 3, 1, 1), (128, 28, 128, 3, 1, 1),
                                (64, 56, 128, 1, 2, 0)):
        xi = rng.standard_normal((1, c, h, h)).astype(np.float32)
        wk = rng.standard_normal((o_, c, k, k)).astype(np.float32)
        case(f"conv2d {c}x{h}x{h} -> {o_} k{k} s{s}",
             cpu.conv2d(xi.shape, wk.shape, (s, s), (p, p)),
             {"im2col @ W.T": lambda a, b, s=s, p=p: np_conv(a, b, s, p)}, [xi, wk], 1e-2,
             "BLAS")
    sm = rng.standard_normal((64, 1000)).astype(np.float32)

    def np_softmax(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    case("softmax 64x1000", cpu.softmax(sm.shape), {"exp / sum": np_softmax}, [sm], 1e-5,
         "other")


def report(args: argparse.Namespace, rows: list, net: list[dict]) -> int:
    """Print the goals and write the record; 0 when every result agreed."""
    print()
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; median of "
          f"{args.repeat} interleaved samples of {'wall-clock' if args.wall else 'thread CPU'} "
          "time")
    summary = {}
    for kind, goal in GOALS.items():
        r = [t_ref / t for _, k, t, t_ref, _ in rows if k == kind]
        if not r:
            continue
        worst, geo = min(r), float(np.exp(np.mean(np.log(r))))
        summary[kind] = {"geomean_ratio": geo, "worst_ratio": worst, "goal": goal}
        print(f"{kind:13} geometric-mean numpy/ours = {geo:.2f}, worst "
              f"{worst:.2f} (goal >= {goal}: {'met' if worst >= goal else 'MISSED'})")
    by_op: dict[str, dict] = {}
    for r in net:
        o = by_op.setdefault(r["op"], {"nodes": 0, "llvm_ms": 0.0, "numpy_ms": 0.0,
                                       "worst_ratio": float("inf")})
        o["nodes"] += 1
        o["llvm_ms"] += r["llvm_ms"]
        o["numpy_ms"] += r["numpy_ms"]
        o["worst_ratio"] = min(o["worst_ratio"], r["ratio"])
    if net:
        print(f"\n{'host op (all networks)':24} {'nodes':>5} {'llvm ms':>9} {'numpy ms':>9} "
              f"{'worst numpy/llvm':>17}")
        for op, o in sorted(by_op.items()):
            print(f"{op:24} {o['nodes']:5} {o['llvm_ms']:9.4f} {o['numpy_ms']:9.4f} "
                  f"{o['worst_ratio']:17.2f}")
        worst = min(r["ratio"] for r in net)
        print(f"network host ops: worst numpy/llvm {worst:.2f} (goal >= 1: "
              f"{'met' if worst >= 1 else 'MISSED'})")
    write_record("bench_compiler_cpu",
                 {"kernels": [{"name": n, "kind": k, "ours_ms": t * 1e3, "ratio": t_ref / t,
                               "agrees": ok} for n, k, t, t_ref, ok in rows],
                  "summary": summary,
                  "host_ops": {f"{r['network']}:{r['node']}": r for r in net},
                  "host_ops_by_op": by_op,
                  "host_ops_worst_ratio": min((r["ratio"] for r in net), default=None)},
                 {"kernels_numpy_ms": {n: t_ref * 1e3 for n, _, _, t_ref, _ in rows},
                  "host_ops_numpy_ms": {f"{r['network']}/{r['node']}": r["numpy_ms"]
                                        for r in net}},
                 params={"repeat": args.repeat, "blas_threads": args.blas_threads,
                         "clock": "wall" if args.wall else "thread", "networks": args.networks})
    return 0 if all(ok for *_, ok in rows) and all(r["agrees"] for r in net) else 1


if __name__ == "__main__":
    raise SystemExit(main())
