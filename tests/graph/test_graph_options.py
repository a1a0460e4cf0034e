"""A compile's options are one record (CompileOptions): checked when built, read whole by
compile_graph, and recorded in the module's manifest, from which a loaded module has them back."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from vta.compiler.graph.errors import InputError
from vta.compiler.graph.module import compile_graph, load_module
from vta.compiler.graph.onnx_frontend import from_onnx
from vta.compiler.graph.options import LOWERED_OPS, VTA_OPS, CompileOptions
from vta.isa import Config

from .conftest import onnx_model

pytestmark = pytest.mark.sim


def _conv_dense():  # noqa: ANN202
    rng = np.random.default_rng(1)
    inits = {"w": rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.2,
             "fw": rng.standard_normal((10, 16 * 4 * 4)).astype(np.float32) * 0.05,
             "fb": np.zeros(10, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1, name="fc")]
    return from_onnx(onnx_model(nodes, {"x": [1, 16, 4, 4]}, {"y": [1, 10]}, inits))


def test_defaults_and_name_lists() -> None:
    o = CompileOptions(cpu_layers=["fc"], float_layers={"conv"})
    assert o.cpu_layers == ("fc",) and o.float_layers == ("conv",)  # frozen: tuples
    d = CompileOptions()
    assert d.vta_ops == LOWERED_OPS and d.keep_first_float and d.threads and d.host == "llvm"
    assert CompileOptions.from_json(o.to_json()) == o


@pytest.mark.parametrize("bad, needle", [
    ({"host": "gcc"}, "unknown host kernels 'gcc'; use llvm or numpy"),
    ({"calibration": "kl"}, "unknown calibration 'kl'; use one of mse, max, percentile"),
    ({"vta_ops": ("QConv", "Softmax")}, "vta_ops Softmax: not an op VTA runs"),
    ({"cpu_layers": "fc"}, "cpu_layers must be a list of names, not the string 'fc'"),
])
def test_a_bad_option_is_a_one_line_input_error(bad, needle) -> None:  # noqa: ANN001
    with pytest.raises(InputError, match="^" + needle.replace("(", r"\(")) as e:
        CompileOptions(**bad)
    assert "\n" not in str(e.value)


def test_the_module_records_its_options(tmp_path) -> None:
    g = _conv_dense()
    opts = CompileOptions(cpu_layers=("fc",), vta_ops=VTA_OPS, keep_first_float=False,
                          board="ultra96-v2", host="numpy", per_channel=True)
    m = compile_graph(g, Config(), opts, jobs=1)
    assert m.options == opts and m.board == "ultra96-v2"
    # what the options say is what was compiled: fc stays on the CPU, the conv goes to VTA with
    # one weight scale per output channel, and no host kernel IR is stored (numpy)
    assert m.partition["fc"] == "cpu" and m.partition["conv"] == "vta"
    conv = {i.node: i for i in m.layers}["conv"]
    assert isinstance(conv.w_scale, list) and len(conv.w_scale) == 16
    assert m.host_ir == {}
    back = load_module(m.save(tmp_path / "mod"))
    assert back.options == opts and back.board == "ultra96-v2"
    defaults = compile_graph(g, Config(), CompileOptions(keep_first_float=False), jobs=1)
    assert defaults.partition["fc"] == "vta" and defaults.options.board is None
