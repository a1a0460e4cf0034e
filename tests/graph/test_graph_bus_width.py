"""The bus width is the configuration's (BUS_WIDTH): a module compiled for a 128-bit
configuration records it, runs on a 128-bit tsim core, and its default knobs are ranked by the
performance model of a 128-bit core (their knob cache entries are not the 64-bit ones)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from vta.compiler.graph.executor import Executor
from vta.compiler.graph.int8_executor import run_quantized
from vta.compiler.graph.ir import Graph, Node, TensorInfo
from vta.compiler.graph.module import compile_graph, load_module
from vta.compiler.graph.options import CompileOptions
from vta.compiler.topi import defaults
from vta.sim.perf import estimate

from .conftest import rand_input


def _conv_dense() -> Graph:
    rng = np.random.default_rng(4)

    def w(*s):  # noqa: ANN002, ANN202
        return (rng.standard_normal(s) * np.sqrt(2 / np.prod(s[1:]))).astype(np.float32)

    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "dilations": [1, 1], "group": 1,
            "strides": [1, 1], "activation": "relu", "act_min": 0.0, "act_max": None}
    nodes = [Node("Conv", "c1", ["x", "w1", "b1"], ["y1"], conv),
             Node("Flatten", "flat", ["y1"], ["f"], {"axis": 1}),
             Node("Dense", "fc", ["f", "wf", "bf"], ["y"], {})]
    params = {"w1": w(16, 8, 3, 3), "b1": w(16) * 0.1, "wf": w(16, 16 * 8 * 8),
              "bf": w(16) * 0.1}
    return Graph(nodes, {"x": TensorInfo((1, 8, 8, 8))}, ["y"], params, "bus")


def _layer_runs(m, x) -> dict[str, object]:  # noqa: ANN001
    """Each VTA layer's RunStats on tsim (the executor's device, as `vta run` opens it); the
    outputs are the int8 reference's bits."""
    runs: list = []
    with Executor(m, "tsim") as ex:
        run = ex.dev.run
        ex.dev.run = lambda program: runs.append(run(program)) or runs[-1]
        out = ex.run(x)["y"]
        rep = ex.last_report
    np.testing.assert_array_equal(out, run_quantized(m.graph, x)["y"])
    names = [r.node for r in rep.layers if r.where == "tsim"]
    assert [r.cycles for r in rep.layers if r.where == "tsim"] == [s.cycles for s in runs]
    return dict(zip(names, runs))


@pytest.mark.tsim
def test_a_128_bit_module_runs_on_a_128_bit_tsim_core(small_cfg, tmp_path) -> None:
    """The manifest records BUS_WIDTH 128; `vta run --target tsim` of the module simulates the
    128-bit core: the same programs move fewer, 16-byte AXI beats and take other cycles than
    on the 64-bit core, each within 10% of the performance model of its own bus width."""
    from ..conftest import require_tool

    require_tool("verilator")
    wide = small_cfg.with_bus_width(128)
    g = _conv_dense()
    x = rand_input(g, 1)
    m = load_module(compile_graph(g, wide, CompileOptions(keep_first_float=False, pow2=True),
                                  jobs=1).save(tmp_path / "mod"))
    assert m.cfg == wide and m.cfg.bus_width == 128
    assert {k for k, v in m.partition.items() if v == "vta"} == {"c1", "fc"}
    on_128 = _layer_runs(m, x)
    on_64 = _layer_runs(replace(m, cfg=small_cfg), x)  # the same programs, a 64-bit core
    assert set(on_128) == set(on_64) == {"c1", "fc"}
    assert [s.cycles for s in on_128.values()] != [s.cycles for s in on_64.values()]
    for name, kern in m.kernels.items():
        wide_run, narrow_run = on_128[name], on_64[name]
        assert (wide_run.bus_width, narrow_run.bus_width) == (128, 64)
        # the same bytes in 16-byte beats: fewer than the 64-bit core's 8-byte ones
        assert wide_run.bytes_loaded == narrow_run.bytes_loaded
        assert wide_run.axi.read_beats < narrow_run.axi.read_beats, name
        assert wide_run.axi.write_beats <= narrow_run.axi.write_beats, name
        assert 16 * wide_run.axi.read_beats >= sum(wide_run.bytes_loaded.values())
        perf_128 = estimate(kern.program, wide).cycles
        perf_64 = estimate(kern.program, small_cfg).cycles
        assert kern.cycles == pytest.approx(perf_128, rel=0.02), name  # ranked on 128 bits
        assert abs(wide_run.cycles - perf_128) <= 0.1 * wide_run.cycles, (name, perf_128)
        assert abs(narrow_run.cycles - perf_64) <= 0.1 * narrow_run.cycles, (name, perf_64)


@pytest.mark.unit
def test_default_knobs_are_ranked_with_the_configurations_bus(small_cfg, monkeypatch,
                                                              tmp_path) -> None:
    """A dense layer's default knobs on a 128-bit configuration: their cycles are the
    performance model's of a 128-bit core, and their knob cache entry is another one than the
    64-bit configuration's (which stays what it was: its key has no BUS_WIDTH)."""
    from vta.compiler.graph.lowering import plan_node

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    g = _conv_dense()
    n = g.node("fc")
    q = Node("QDense", "fc", list(n.inputs), list(n.outputs),
             {"shift": 1, "mul": 2, "shift2": 1, "lo": -128, "hi": 127})
    wide = small_cfg.with_bus_width(128)
    chosen = {}
    for cfg in (small_cfg, wide):
        layer = replace(plan_node(q, {"f": (1, 16 * 8 * 8)}, g.params, cfg), node="")
        key, hit = defaults.probe(lambda c=cfg, lay=layer: lay.default(c, True))
        assert hit is None and key is not None  # an empty cache: it would search
        ch = layer.default(cfg, True)
        again = defaults.probe(lambda c=cfg, lay=layer: lay.default(c, True))
        assert again[0] == key and again[1].knobs == ch.knobs  # stored under that key
        cycles, _ = defaults.program_cycles(layer.operator(cfg, ch.knobs))
        assert ch.cycles == cycles  # timed on this configuration's core
        chosen[cfg.bus_width] = key, ch, layer
    k64, (k128, ch128, l128) = chosen[64][0], chosen[128]
    assert k64 != k128 and '"BUS_WIDTH": 128' in k128 and "BUS_WIDTH" not in k64
    # the 128-bit choice's program on the 64-bit core is another count: its own bus ranked it
    rec = defaults.program_cycles(l128.operator(small_cfg, ch128.knobs))[0]
    assert rec != ch128.cycles
