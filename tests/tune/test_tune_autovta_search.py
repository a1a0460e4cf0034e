"""AutoVTA's search, outputs and CLI on a tiny network, against exhaustive enumeration."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from vta.boards import Resources, get_board
from vta.isa import Config
from vta.isa.errors import ConfigError, VTAError
from vta.tune.autovta.explore import explore
from vta.tune.autovta.network import (
    Network,
    NetworkError,
    VTALayer,
    load_network,
    lower_layer,
    network_cycles,
    port_params,
)
from vta.tune.autovta.pareto import dominates
from vta.tune.autovta.report import write_outputs
from vta.tune.autovta.resources import KINDS, ResourceModel
from vta.tune.autovta.space import candidate_from_values

from ..conftest import unavailable

#: A small space: 1x4x4 and 1x8x8 cores with a few buffer sizes.
SMALL = {"LOG_BATCH": [0], "LOG_BLOCK": [2, 3], "LOG_UOP_BUFF_SIZE": [11, 12],
         "LOG_INP_BUFF_SIZE": [11, 12, 13], "LOG_WGT_BUFF_SIZE": [12, 14],
         "LOG_ACC_BUFF_SIZE": [12, 14], "bus_width": [64, 128]}
#: An even smaller one for the command-line tests.
TINY = {**SMALL, "LOG_UOP_BUFF_SIZE": [11], "LOG_INP_BUFF_SIZE": [11, 12]}
#: The parameters the hardware knobs do not set (the data widths), as `vta explore` passes them.
BASE = Config()


def _tiny_onnx(path: Path) -> Path:
    """conv 3x3 (16->16: the first conv, 62% of the MACs, so quantized), conv 3x3 (16->32,
    stride 2), conv 1x1 (32->32), global average pool, dense 32->10, on an 8x8 input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def conv(x: str, cin: int, cout: int, k: int, s: int, name: str) -> str:
        w = rng.normal(0, np.sqrt(2 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{name}.w"))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.y"], name=name,
                                      kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [f"{name}.y"], [f"{name}.r"], name=f"{name}.relu"))
        return f"{name}.r"

    y = conv("x", 16, 16, 3, 1, "c0")
    y = conv(y, 16, 32, 3, 2, "c1")
    y = conv(y, 32, 32, 1, 1, "c2")
    nodes.append(helper.make_node("GlobalAveragePool", [y], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat", axis=1))
    w = rng.normal(0, 0.2, (10, 32)).astype(np.float32)
    inits += [numpy_helper.from_array(w, "fc.w"),
              numpy_helper.from_array(np.zeros(10, np.float32), "fc.b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["out"], name="fc",
                                  transB=1))
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    """A private cache directory and the tiny model."""
    d = tmp_path_factory.mktemp("autovta")
    old = os.environ.get("VTA_CACHE_DIR")
    os.environ["VTA_CACHE_DIR"] = str(d / "cache")
    yield _tiny_onnx(d / "tiny.onnx")
    if old is None:
        os.environ.pop("VTA_CACHE_DIR", None)
    else:
        os.environ["VTA_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def net(env: Path) -> Network:
    return load_network(str(env), BASE)


def _tight_board():
    """PYNQ-Z1 with a budget small enough that part of SMALL does not fit."""
    return dataclasses.replace(get_board("pynq-z1"),
                               budget=Resources(lut=60000, ff=100000, bram=24, dsp=220))


def _exhaustive(net: Network, board, model: ResourceModel) -> dict[tuple, tuple[int, dict]]:
    """Every valid, fitting point of SMALL with its cycles, enumerated independently."""
    out = {}
    names = list(SMALL)
    for combo in itertools.product(*SMALL.values()):
        values = dict(zip(names, combo))
        try:
            cand = candidate_from_values(values, BASE)
        except ConfigError:
            continue
        est = model.estimate(cand.cfg)
        if not all(est[k] <= board.budget.as_dict()[k] for k in KINDS):
            continue
        perf = network_cycles(net, cand.cfg, board.bus_width)
        if perf.unmapped:
            continue
        out[tuple(sorted(values.items()))] = (perf.cycles, est)
    return out


@pytest.mark.unit
def test_network_layers_and_cycles(net: Network) -> None:
    # c0, the first conv, holds 62% of the MACs: int8 on VTA like c1, c2 and fc (a first
    # conv under FIRST_CONV_FLOAT_SHARE would stay float on the CPU)
    assert [layer.name for layer in net.layers] == ["c0", "c1", "c2", "fc"]
    assert net.cpu_layers == ()
    assert net.macs == 16 * 16 * 9 * 8 * 8 + 16 * 32 * 9 * 4 * 4 + 32 * 32 * 4 * 4 + 32 * 10
    cfg = Config.preset("small")
    perf = network_cycles(net, cfg)
    assert perf.complete and perf.cycles == sum(perf.layer_cycles.values())
    # the GEMM work the lowered programs do covers every MAC of the layers (4x4 blocks)
    from vta.isa import GemmInsn

    gemm = sum(i.iter_out * i.iter_in * (i.uop_end - i.uop_bgn) * cfg.macs_per_cycle
               for layer in net.layers for i in lower_layer(layer, cfg)
               if isinstance(i, GemmInsn))
    assert gemm >= net.macs
    # the bus width changes the timing, not the programs: same micro-ops and bytes moved
    wide = network_cycles(net, cfg.with_bus_width(128))
    assert (wide.gemm_uops, wide.bytes_loaded) == (perf.gemm_uops, perf.bytes_loaded)
    assert wide.cycles != perf.cycles


@pytest.mark.unit
def test_memory_moves_one_word_of_the_narrower_of_bus_and_port() -> None:
    assert port_params(64).bandwidth == 8.0 and port_params(128).bandwidth == 16.0
    assert port_params(128, 64).bandwidth == 8.0 and port_params(64, 128).bandwidth == 8.0
    # a dense layer reads each 256 KiB weight byte once: bound by the memory port
    net = Network("fc", (VTALayer("fc", (1, 512), (512, 512), (), 8, -128, 127),))
    narrow = network_cycles(net, Config(), 128)
    wide = network_cycles(net, Config(BUS_WIDTH=128), 128)
    wide_on_narrow_port = network_cycles(net, Config(BUS_WIDTH=128), 64)
    # weights alone: 256 KiB at 8 or 16 bytes per cycle
    assert narrow.cycles >= 512 * 512 // 8 and wide.cycles >= 512 * 512 // 16
    # the 128-bit core nearly halves it on a 128-bit port; on a 64-bit port it keeps 8 bytes
    # per cycle (within 1% of the 64-bit core: only the burst and fetch arithmetic differ)
    assert wide.cycles < 0.6 * narrow.cycles, (wide.cycles, narrow.cycles)
    assert abs(wide_on_narrow_port.cycles - narrow.cycles) <= 0.01 * narrow.cycles


@pytest.mark.unit
def test_layer_cycles_equal_the_compiled_kernels(env: Path, net: Network) -> None:
    # the compiler's own module (real memory plan and addresses) against AutoVTA's lowering
    from vta.compiler.graph.module import compile_graph
    from vta.compiler.graph.onnx_frontend import load_onnx
    from vta.sim.perf import estimate

    mid = Config(LOG_BLOCK=3, LOG_UOP_BUFF_SIZE=12, LOG_INP_BUFF_SIZE=13, LOG_WGT_BUFF_SIZE=14,
                 LOG_ACC_BUFF_SIZE=14)
    for cfg in (Config.preset("small"), mid.with_bus_width(128)):
        bw = cfg.bus_width
        module = compile_graph(load_onnx(env), cfg)
        perf = network_cycles(net, cfg)
        assert set(module.kernels) == set(perf.layer_cycles)
        for name, kern in module.kernels.items():
            assert estimate(kern.program, cfg, params=port_params(bw)).cycles == \
                perf.layer_cycles[name], name


@pytest.mark.unit
def test_search_finds_the_exhaustive_optimum(net: Network) -> None:
    board = _tight_board()
    model = ResourceModel.for_board(board)
    truth = _exhaustive(net, board, model)
    assert 10 <= len(truth) < 100
    best_cycles = min(c for c, _ in truth.values())
    for tuner, budget in (("auto", 1000), ("xgb", int(0.6 * len(truth)))):
        res = explore(board, net, base=BASE, n_trial=budget, model=model, ranges=SMALL, tuner=tuner)
        assert res.fitting_size == len(truth)
        assert res.best is not None and res.best.cycles == best_cycles, tuner
        if tuner == "auto":
            assert res.tuner == "grid" and len(res.points) == len(truth)
        # every point reported as fitting does fit by the resource model, and the measured
        # cycles are the independently computed ones
        for p in res.points:
            key = tuple(sorted({**p.cand.cfg.params, "bus_width": p.cand.bus_width}.items()))
            key = tuple((k, v) for k, v in key if k in SMALL)
            assert p.fits and key in truth
            est = model.estimate(p.cand.cfg)
            assert all(est[k] <= board.budget.as_dict()[k] for k in KINDS)
            if p.cycles is not None:
                assert p.cycles == truth[key][0]


@pytest.mark.unit
def test_pareto_front_against_brute_force(net: Network) -> None:
    board = _tight_board()
    res = explore(board, net, base=BASE, n_trial=1000, ranges=SMALL)
    pts = res.measured
    objs = {id(p): (p.cycles, p.resources["lut"], p.resources["dsp"], p.resources["bram"])
            for p in pts}
    for p in pts:
        dominated = any(dominates(objs[id(q)], objs[id(p)]) for q in pts if q is not p)
        assert p.pareto == (not dominated)
    assert res.best in res.pareto


@pytest.mark.unit
def test_outputs_are_complete_and_atomic(net: Network, tmp_path: Path) -> None:
    board = _tight_board()
    res = explore(board, net, base=BASE, n_trial=12, ranges=SMALL, tuner="random", seed=3)
    out = write_outputs(res, tmp_path / "out")
    rep = json.loads((out / "explore.json").read_text())
    assert len(rep["points"]) == len(res.points) == 12
    best = rep["best"]
    assert best["cycles"] == min(p["cycles"] for p in rep["points"] if p["cycles"])
    assert best["bus_width"] in (64, 128)
    cfg = Config.from_json(out / "vta_config.json")
    assert cfg.params == best["config"]
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # an unrelated existing directory is never replaced
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(VTAError, match="neither an exploration output"):
        write_outputs(res, other)
    assert (other / "keep.txt").exists() and not (other / "explore.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.unit
def test_cli_explore_and_verilog_round_trip(env: Path, tmp_path: Path, capsys) -> None:
    from vta.cli.main import main

    out = tmp_path / "exp"
    argv = ["explore", "--board", "pynq-z1", "--model", str(env), "--budget", "40", "-o",
            str(out)] + [f"--range={k}={','.join(map(str, v))}" for k, v in TINY.items()]
    assert main(argv) == 0
    rep = json.loads((out / "explore.json").read_text())
    # PYNQ-Z1's memory port is 64 bits, but --range asked for 128 too: both are searched
    assert {p["bus_width"] for p in rep["points"]} == {64, 128}
    best = rep["best"]
    assert best["fits"] and best["speedup_vs_reference"] > 0
    # PYNQ-Z1's 220 DSP48E1 hold 1x16x16 packed (128 + 48 ALU), 2x8x8 without (128 + 48)
    assert rep["dsp_ceiling"] == {
        "packed": True, "with_packing": {"batch": 1, "block": 16, "macs_per_cycle": 256},
        "without_packing": {"batch": 2, "block": 8, "macs_per_cycle": 128}}
    assert ("DSP ceiling (the largest GEMM with every multiplier in a DSP): 1x16x16 (256 MACs) "
            "with packed multipliers, 2x8x8 (128 MACs) without; this board's core packs"
            ) in capsys.readouterr().out
    vdir = tmp_path / "v"  # the written configuration carries the best point's bus width
    assert main(["verilog", "--config", str(out / "vta_config.json"), "-o", str(vdir)]) == 0
    desc = json.loads((vdir / "vta_core.json").read_text())
    assert {k: desc["config"][k] for k in best["config"]} == best["config"]
    assert desc["bus_width"] == best["bus_width"]
    assert "module vta_core" in (vdir / "vta_core.v").read_text()
    capsys.readouterr()


@pytest.mark.unit
def test_explored_config_file_carries_the_bus_width(env: Path, tmp_path: Path, capsys) -> None:
    """A best point on the 128-bit bus: its vta_config.json says so, and `vta verilog --config`
    builds exactly the core of that point."""
    from vta.cli.main import main
    from vta.hw.verilog import generate

    out = tmp_path / "exp"
    ranges = {**TINY, "bus_width": [128]}
    assert main(["explore", "--board", "zcu104", "--model", str(env), "--budget", "12", "-o",
                 str(out)] + [f"--range={k}={','.join(map(str, v))}"
                              for k, v in ranges.items()]) == 0
    best = json.loads((out / "explore.json").read_text())["best"]
    assert best["bus_width"] == 128
    written = json.loads((out / "vta_config.json").read_text())
    assert written["BUS_WIDTH"] == 128
    cfg = Config.from_json(out / "vta_config.json")
    assert cfg.params == best["config"] and cfg.bus_width == 128
    vdir = tmp_path / "v"
    assert main(["verilog", "--config", str(out / "vta_config.json"), "-o", str(vdir)]) == 0
    desc = json.loads((vdir / "vta_core.json").read_text())
    assert desc["bus_width"] == 128
    assert (vdir / "vta_core.v").read_text() == generate(
        Config(**best["config"], BUS_WIDTH=128), name="vta_core")
    # and a bad value in the file is a config error
    (tmp_path / "bad.json").write_text(json.dumps({**written, "BUS_WIDTH": 96}))
    with pytest.raises(ConfigError, match="BUS_WIDTH=96 is not a bus width"):
        Config.from_json(tmp_path / "bad.json")


@pytest.mark.unit
def test_cli_bad_board_and_model(env: Path, tmp_path: Path, capsys) -> None:
    from vta.cli.main import main

    def error_line() -> str:
        lines = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
        assert len(lines) == 1 and lines[0].startswith("vta explore: error: ")
        return lines[0]

    assert main(["explore", "--board", "nosuch", "-o", str(tmp_path / "a")]) == 2
    assert "unknown board 'nosuch'" in error_line()
    assert main(["explore", "--board", "pynq-z1", "--model", "resnet99", "-o",
                 str(tmp_path / "b")]) == 2
    assert "unknown model 'resnet99'" in error_line()
    assert main(["explore", "--board", "pynq-z1", "--model", str(tmp_path / "no.onnx"), "-o",
                 str(tmp_path / "c")]) == 2
    assert "does not exist" in error_line()
    assert main(["explore", "--board", "pynq-z1", "--model", str(env), "--range", "FOO=1",
                 "-o", str(tmp_path / "d")]) == 2
    assert "--range" in error_line()
    assert not any((tmp_path / n).exists() for n in "abcd")


@pytest.fixture(scope="module")
def best(net: Network):
    """The best point of SMALL under the tight budget."""
    return explore(_tight_board(), net, base=BASE, n_trial=1000, ranges=SMALL).best


def _matmul(cfg: Config):
    from vta.sim.programs import matmul_program

    m, n, k = 2 * cfg.batch, 3 * cfg.block_out, 3 * cfg.block_in
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (m, k))
    b = rng.integers(-128, 128, (n, k))
    prog, dram, plan = matmul_program(cfg, m, n, k, a=a, b=b)
    want = ((a @ b.T) & 0xFF).astype(np.uint8).view(np.int8)  # int32 acc, low 8 bits stored
    return prog, dram, plan, want


@pytest.mark.sim
def test_best_config_runs_a_program_on_fsim(best) -> None:
    from vta.sim import fsim

    cfg = best.cand.cfg
    prog, dram, plan, want = _matmul(cfg)
    assert np.array_equal(plan.read_c(fsim.run(prog, dram, cfg).dram), want)


@pytest.mark.sim
@pytest.mark.slow
def test_best_config_runs_a_program_on_rtl(net: Network) -> None:
    from vta.hw.simulate import run_program

    # the Amaranth simulation of a core takes minutes per GEMM block size: search 1x4x4 cores
    best = explore(_tight_board(), net, base=BASE, n_trial=1000,
                   ranges={**SMALL, "LOG_BLOCK": [2]}).best
    cfg = best.cand.cfg
    prog, dram, plan, want = _matmul(cfg)
    rtl = run_program(prog, dram, cfg)  # cfg carries the best point's bus width
    assert np.array_equal(plan.read_c(rtl.dram), want)


@pytest.mark.unit
def test_finalists_are_the_best_then_the_pareto_front(net: Network) -> None:
    from vta.tune.autovta.finalists import finalists

    res = explore(_tight_board(), net, base=BASE, n_trial=1000, ranges=SMALL)
    front = res.pareto
    fin = finalists(res, 3)
    assert fin[0] is res.best and len(fin) == min(3, len(front))
    assert all(p.pareto for p in fin)
    assert [p.cycles for p in fin[1:]] == sorted(p.cycles for p in fin[1:])
    assert finalists(res, 0) == []


@pytest.mark.unit
def test_synth_finalists_record_fit_and_model_error(net: Network, monkeypatch) -> None:
    """synth_finalists with a stand-in synthesis (the real one is the slow synth test): the
    recorded fit and model error follow from the numbers synthesis returned, by hand."""
    from vta.tune.autovta import finalists as fin_mod
    from vta.tune.autovta import synthcache

    board = _tight_board()
    res = explore(board, net, base=BASE, n_trial=1000, ranges=SMALL)
    calls = []

    def fake_synthesize(bname, cfg, **_):
        calls.append((bname, cfg.params["LOG_BLOCK"], cfg.bus_width))
        # 1x8x8 cores "need" twice the BRAM budget, 1x4x4 cores 10 LUTs more than estimated
        big = cfg.block_in == 8
        return {"used": {"lut": 1000.0, "ff": 2000.0, "bram": 48.0 if big else 10.0,
                         "dsp": 4.0}, "seconds": 1.0, "cached": False,
                "report": {"problems": []}}

    monkeypatch.setattr(synthcache, "synthesize", fake_synthesize)
    done = fin_mod.synth_finalists(res, 2)
    assert [p.key for p in done] == [p.key for p in fin_mod.finalists(res, 2)]
    assert len(calls) == len(done) and all(c[0] == board.name for c in calls)
    for p in done:
        used = p.synth["used"]
        assert p.synth["fits"] == (used["bram"] <= board.budget.bram)
        for r in KINDS:
            want = round((p.resources[r] - used[r]) / max(used[r], 1.0), 4)
            assert p.synth["model_error"][r] == want


@pytest.mark.unit
def test_stale_synthesis_reports_are_not_used(env: Path, monkeypatch, tmp_path: Path) -> None:
    """A cached report made from other hardware sources is neither reused nor calibrated on."""
    from vta.tune.autovta import synthcache
    from vta.tune.autovta.calibration import synthesis_samples

    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))
    cfg, board = Config.preset("small"), get_board("pynq-z1")
    path = synthcache._path(board.name, cfg)
    path.parent.mkdir(parents=True)
    entry = {"format": synthcache.SYNTH_FORMAT, "used": {"lut": 1.0, "ff": 2.0, "bram": 3.0,
                                                         "dsp": 4.0},
             "hw_hash": "0" * 16, "report": {}, "seconds": 1.0}
    path.write_text(json.dumps(entry))
    assert synthcache.cached_synthesis(board.name, cfg) is None
    stale = synthcache.cached_synthesis(board.name, cfg, allow_stale=True)
    assert stale["stale"] and stale["used"]["bram"] == 3.0
    samples, missing = synthesis_samples(board.name, [cfg])
    assert samples == [] and len(missing) == 1 and "stale" in missing[0]
    # the same report made from the current sources is used
    path.write_text(json.dumps({**entry, "hw_hash": synthcache.hw_hash()}))
    samples, missing = synthesis_samples(board.name, [cfg])
    assert missing == [] and samples[0][1]["bram"] == 3.0


@pytest.mark.tsim
@pytest.mark.slow
def test_tsim_finalists_match_fsim(net: Network) -> None:
    """The best finalist of the small space runs a matmul on tsim, bit-exact with fsim, and
    the performance model's estimate of that program is within 25% of tsim's cycles."""
    from vta.tune.autovta.finalists import tsim_finalists

    res = explore(_tight_board(), net, base=BASE, n_trial=1000, ranges={**SMALL, "LOG_BLOCK": [2]})
    done, why = tsim_finalists(res, 1)
    if why is not None:
        unavailable(why)
    (p,) = done
    assert p is res.best and "error" not in p.tsim, p.tsim
    assert p.tsim["matches_fsim"] is True
    assert p.tsim["cycles"] > 0
    assert abs(p.tsim["perf_model_error"]) <= 0.25


def test_network_of_a_dynamic_size_model_at_given_shapes(env: Path, net: Network) -> None:
    """An ONNX file with symbolic height and width (as exported with dynamic axes) loads at the
    input shape given; the network cache keeps one entry per shape."""
    import onnx

    model = onnx.load(str(env))
    for d in model.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.dim_param = "size"
    dyn = env.with_name("tiny_dynamic.onnx")
    onnx.save(model, str(dyn))
    big = load_network(str(dyn), BASE, input_shapes={"x": (1, 16, 16, 16)})
    assert [layer.name for layer in big.layers] == ["c0", "c1", "c2", "fc"]
    assert big.macs == (16 * 16 * 9 * 16 * 16 + 16 * 32 * 9 * 8 * 8 + 32 * 32 * 8 * 8
                        + 32 * 10)
    same = load_network(str(dyn), BASE, input_shapes={"": (1, 16, 8, 8)})
    assert same.layers == net.layers
    with pytest.raises(NetworkError, match="input shapes apply to ONNX files"):
        load_network("resnet18", BASE, input_shapes={"": (1, 3, 64, 64)})
