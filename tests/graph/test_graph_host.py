"""LLVM host kernels of compiled networks (vta.compiler.graph.host) against the numpy kernels.

Integer and data-movement kernels must give the numpy kernels' bits. Float kernels may differ in
the last bits (LLVM reassociates sums and fuses multiply-adds; softmax and tanh use a polynomial
exp): conv within 1e-5 of the output's largest magnitude (float32 sums of up to a few thousand
products in another order), softmax within 1e-6 of it, tanh within 1e-6 absolute.
"""

from __future__ import annotations

import numpy as np
import pytest
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.host import module_host_kernels
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.module import compile_graph, load_module
from vta.compiler.graph.options import CompileOptions
from vta.compiler.ops import kernel_for
from vta.isa import Config

from .conftest import rand_input

#: float ops whose LLVM kernel is not bit-exact, and the allowed error (relative to the
#: reference's largest magnitude, absolute for tanh)
FLOAT_TOL = {"Conv": 1e-5, "Softmax": 1e-6, "Tanh": 1e-6}
#: every CPU op of the zoo's networks that has an LLVM kernel (their residual adds run on
#: VTA's ALU; the QAdd kernel is checked on its own below)
ZOO_HOST_OPS = {"Conv", "MaxPool", "Quantize", "Dequantize", "QGlobalAveragePool",
                "QConv", "Softmax", "Tanh", "QPad"}
CPU_LAYERS = {"mobilenet_v1": ("dw1",)}


def _check_close(op: str, got: np.ndarray, ref: np.ndarray) -> None:
    assert got.shape == ref.shape and got.dtype == ref.dtype, (op, got.shape, ref.shape)
    if op not in FLOAT_TOL:
        np.testing.assert_array_equal(got, ref, err_msg=op)
        return
    scale = 1.0 if op == "Tanh" else float(np.abs(ref).max())
    err = float(np.abs(got.astype(np.float64) - ref).max())
    assert err <= FLOAT_TOL[op] * scale, f"{op}: error {err:.3g} > {FLOAT_TOL[op]} x {scale:.3g}"


def _kernels(m) -> dict:  # noqa: ANN001
    """The module's host kernels as `vta run` takes them: regenerated, checked against the
    stored IR."""
    return module_host_kernels(m.graph.nodes, m.shapes, m.graph.params, m.partition, m.host_ir)


def _reference(m, feeds) -> dict[str, np.ndarray]:
    """The int8 reference of the quantized graph (numpy), except that a float op with an LLVM
    kernel takes that kernel's output (checked close to numpy's): with those inputs, everything
    downstream (int8 LLVM kernels, VTA) must match bit for bit."""
    env = dict(m.graph.params)
    env.update(feeds)
    kernels = _kernels(m)
    for n in m.graph.nodes:
        args = [env[i] if i else None for i in n.inputs]
        res = kernel_for(n.op)(n, args)
        if n.op in FLOAT_TOL and n.name in m.host_ir:
            got = kernels[n.name](args)
            _check_close(n.op, got, res[0])
            res = [got]
        for o, v in zip(n.outputs, res):
            env[o] = v
    return env


@pytest.fixture(scope="module", params=[False, True], ids=["calibrated", "pow2"])
def modules(small_models, request):
    # the default calibrated scales (fixed-point multipliers) and --pow2-scales (shifts)
    # MobileNet's first depthwise conv runs int8 on the CPU (--cpu-layer), so the int8 conv
    # host kernel (grouped, fixed-point epilogue) is among the zoo's host ops
    return {name: compile_graph(g, Config(), CompileOptions(
                pow2=request.param, cpu_layers=CPU_LAYERS.get(name, ())))
            for name, (_, g) in small_models.items()}


def test_zoo_host_ops_have_llvm_kernels_matching_numpy(modules, small_models) -> None:
    seen = set()
    for name, m in modules.items():
        g = small_models[name][1]
        env = run_quantized(m.graph, rand_input(g, 1), keep=True)
        cpu_ops = {n.op for n in m.graph.nodes if m.partition[n.name] == "cpu"}
        # every CPU op but reshapes (numpy views) has a kernel in the module
        assert {n.op for n in m.graph.nodes if n.name in m.host_ir} == \
            cpu_ops - {"Flatten", "Reshape", "Identity"}, name
        kernels = _kernels(m)
        for n in m.graph.nodes:
            if n.name in m.host_ir:
                k = kernels[n.name]
                _check_close(n.op, k([env[i] if i else None for i in n.inputs]),
                             env[n.outputs[0]])
                seen.add(n.op)
    assert seen == ZOO_HOST_OPS


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v1", "dcgan"])
def test_network_bit_exact_on_fsim_with_llvm_host(modules, small_models, name: str) -> None:
    m, g = modules[name], small_models[name][1]
    x = rand_input(g, 3)
    ref = _reference(m, x)[g.outputs[0]]
    with Executor(m, "fsim") as ex:  # host="llvm" is the default
        assert set(ex._host) == set(m.host_ir)
        np.testing.assert_array_equal(ex.run(x)[g.outputs[0]], ref)
    with Executor(m, "fsim", host="numpy") as ex:
        np.testing.assert_array_equal(ex.run(x)[g.outputs[0]],
                                      run_quantized(m.graph, x)[g.outputs[0]])


def test_mixed_int8_model_with_llvm_host(small_models) -> None:
    """The model of test_graph_vta's mixed-op test (float conv, int8 pad/avg pool/resize/concat/
    max pool, softmax): LLVM where a kernel exists, bit-exact given the float kernels."""
    from vta.compiler.graph.onnx_frontend import from_onnx

    from .test_graph_vta import _mixed_model

    g = from_onnx(_mixed_model())
    m = compile_graph(g, Config())
    assert {"c0", "pool", "softmax"} <= set(m.host_ir)
    x = rand_input(g, 2)
    with Executor(m, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)["y"], _reference(m, x)["y"])


def test_module_stores_ir_and_runs_only_what_the_kit_emits(modules, small_models,
                                                           tmp_path) -> None:
    """The module stores each kernel's IR; `vta run` regenerates it from the graph and runs
    it only when it is the stored text byte for byte (tests/cli/test_cli_trust.py: otherwise
    a one-line error, nothing JIT-compiled)."""
    m, g = modules["resnet18"], small_models["resnet18"][1]
    m.save(tmp_path / "mod")
    lm = load_module(tmp_path / "mod")
    assert lm.host_ir == m.host_ir and all("define" in t for t in lm.host_ir.values())
    assert {k: v.text() for k, v in _kernels(lm).items()} == lm.host_ir
    nm = compile_graph(g, Config(), CompileOptions(host="numpy"))
    assert nm.host_ir == {}
    x = rand_input(g, 5)
    with Executor(lm, "fsim") as ex:
        np.testing.assert_array_equal(ex.run(x)[g.outputs[0]], _reference(m, x)[g.outputs[0]])


def test_machine_code_cache_is_reused_across_processes(tmp_path, monkeypatch) -> None:
    """`vta run` keeps each host kernel's machine code in the user cache: a second load (here
    in a fresh process, where numpy's type addresses differ) skips LLVM and still takes the
    native call path with the right results."""
    import subprocess
    import sys

    from vta.compiler.graph.host import HostKernel
    from vta.compiler.graph.ir import Node
    from vta.compiler.topi import cpu

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    op = cpu.qadd((2, 50), 2, 1, 1, -128, 127)
    k = HostKernel("a", op.name, op.params, op.out_shape, op.llvm_ir)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-128, 128, (2, 50)).astype(np.int8) for _ in range(2))
    n = Node("QAdd", "a", ["a", "b"], ["c"],
             {"mul_a": 2, "mul_b": 1, "shift": 1, "lo": -128, "hi": 127})
    np.testing.assert_array_equal(k([a, b]), kernel_for("QAdd")(n, [a, b])[0])
    assert k.module.optimized_ir is not None and len(list(tmp_path.rglob("*.o"))) == 1
    (tmp_path / "k.txt").write_text(k.text())
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = (
        "import numpy as np, sys; from pathlib import Path\n"
        "from vta.compiler.graph.host import HostKernel\n"
        "from vta.compiler.topi import cpu\n"
        f"d = Path({str(tmp_path)!r})\n"
        "op = cpu.qadd((2, 50), 2, 1, 1, -128, 127)\n"
        "k = HostKernel('a', op.name, op.params, op.out_shape, op.llvm_ir)\n"
        "assert k.text() == (d / 'k.txt').read_text()\n"
        "a, b = np.load(d / 'a.npy'), np.load(d / 'b.npy')\n"
        "out = np.empty((2, 50), np.int8)\n"
        "assert k.module.optimized_ir is None  # from the cache\n"
        "assert k.module.call_flat(a, b, out)  # the native checks accept numpy's arrays\n"
        "np.save(d / 'out.npy', out)\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), k([a, b]))
