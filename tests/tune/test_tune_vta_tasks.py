"""Tuning the compiler's VTA operators: templates, the perf measurer, IR features, models."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from vta.isa import Config
from vta.tune import Measurer, RandomTuner, Task, XGBTuner
from vta.tune.task import task_features
from vta.tune.workloads import WorkloadError, parse_workload


@pytest.fixture(scope="module")
def small() -> Config:
    return Config.preset("small")


@pytest.mark.sim
def test_conv2d_tuning_on_perf_and_best_config_is_correct(small: Config) -> None:
    from vta.compiler.topi import conv2d_packed, conv2d_reference
    from vta.tune.vta_tasks import EPILOGUE, measure_perf

    task = parse_workload("conv2d:H=8,W=8,CI=8,CO=8,K=3,S=1,P=1", small)
    valid = task.space.valid_indices()
    assert 0 < len(valid) < len(task.space)
    res = XGBTuner(task, seed=0).tune(12, Measurer("perf"), batch_size=6)
    assert res.trials == 12 and res.best_cost is not None
    assert all(task.space.is_valid(i) for i, _, _ in res.history)
    # re-measuring the best configuration gives the recorded cost (the model is deterministic)
    best = task.space.get(res.best_index)
    assert measure_perf(task.instantiate(best)) == res.best_cost
    # and the tuned schedule computes the right thing on fsim
    knobs = dict(best.values)
    op = conv2d_packed((1, 2, 8, 8, 1, 4), (2, 2, 3, 3, 4, 4), strides=(1, 1), padding=(1, 1),
                       knobs=knobs, config=small, target="fsim", **EPILOGUE)
    rng = np.random.default_rng(1)
    data = rng.integers(-128, 128, (1, 2, 8, 8, 1, 4), dtype=np.int8)
    kernel = rng.integers(-128, 128, (2, 2, 3, 3, 4, 4), dtype=np.int8)
    bias = rng.integers(-1000, 1000, (1, 2, 1, 1, 1, 4), dtype=np.int32)
    ref = conv2d_reference(data, kernel, (1, 1), (1, 1), op.info["epilogue"], bias=bias)
    assert np.array_equal(op(data, kernel, bias), ref)


@pytest.mark.sim
def test_dense_template_and_features(small: Config) -> None:
    task = parse_workload("dense:N=4,K=16,M=16", small)
    res = RandomTuner(task, seed=0).tune(6, Measurer("perf"), batch_size=3)
    assert res.best_cost is not None
    f = [task_features(task, i) for i, _, _ in res.history[:3]]
    assert all(x.shape == f[0].shape and np.isfinite(x).all() for x in f)
    # different tilings lower to different loop nests: the IR features tell them apart
    assert len({tuple(np.round(x, 6)) for x in f}) == len(f)


@pytest.mark.unit
def test_workload_spec_errors(small: Config) -> None:
    with pytest.raises(WorkloadError, match="CI=6 is not a multiple of 4"):
        parse_workload("conv2d:CI=6", small)
    with pytest.raises(WorkloadError, match="unknown key 'Q'"):
        parse_workload("conv2d:Q=1", small)
    with pytest.raises(WorkloadError, match="not an integer"):
        parse_workload("dense:N=x", small)
    with pytest.raises(WorkloadError, match="unknown workload 'pool'"):
        parse_workload("pool:N=1", small)


@pytest.mark.sim
def test_tasks_from_a_zoo_model(tmp_path, small: Config) -> None:
    import onnx
    from vta.compiler.graph import zoo
    from vta.tune.vta_tasks import tasks_from_model

    path = tmp_path / "r18.onnx"
    onnx.save(zoo.resnet18(image_size=32, num_classes=10), str(path))
    tasks = tasks_from_model(path, small)
    names = {t.name for t in tasks}
    assert names == {"vta.conv2d", "vta.dense", "vta.elementwise"}
    # the residual adds on the ALU, one task per distinct (rescaling, size): 8 adds
    adds = [t for t in tasks if t.name == "vta.elementwise"]
    assert adds and all(t.args[0] == "add" for t in adds) and len(adds) <= 8
    # after the first conv, ResNet-18 has 10 distinct conv shapes: TVM's table C2, C4-C12
    # (its C3, a 1x1 64->64 conv, is not in the standard ResNet-18)
    assert sum(t.name == "vta.conv2d" for t in tasks) == 10
    assert all(isinstance(t, Task) and len(t.space.valid_indices()) > 0 for t in tasks)


@pytest.mark.sim
def test_transposed_conv_tasks_from_dcgan(tmp_path, small: Config) -> None:
    import onnx
    from vta.compiler.graph import zoo
    from vta.tune.vta_tasks import tasks_from_model

    path = tmp_path / "dcgan.onnx"
    onnx.save(zoo.dcgan_generator(nz=16, ngf=8), str(path))
    tasks = tasks_from_model(path, small)
    # convt1..convt4 (stride 2, 4x4, ONNX pads 1 -> the equivalent conv's pads 2); convt0, the
    # first conv, stays on the CPU
    assert [t.name for t in tasks] == ["vta.conv2d_transpose"] * 4
    assert [t.args[2] for t in tasks] == [4, 8, 16, 32]
    assert all(t.args[7:13] == (2, 2, 2, 2, 2, 2) for t in tasks)
    assert all(len(t.space.valid_indices()) > 0 for t in tasks)


@pytest.mark.sim
@pytest.mark.parametrize("spec", ["conv2d_transpose:H=4,W=4,CI=8,CO=4,K=4,S=2,P=1",
                                  "clip:N=1,C=8,H=4,W=4,LO=3,HI=90",
                                  "group_conv2d:H=4,W=4,CI=16,CO=16,K=3,S=1,P=1,G=2",
                                  "group_conv2d:H=6,W=6,CI=8,CO=8,K=3,S=2,P=1,G=8"])
def test_new_templates_measure_right_results_on_fsim(spec: str, small: Config) -> None:
    """The fsim measurer runs each candidate and compares it with numpy (a wrong result would
    be recorded invalid); the perf costs of the same knobs are positive cycles."""
    task = parse_workload(spec, small)
    res = RandomTuner(task, seed=0).tune(3, Measurer("fsim"), batch_size=3)
    assert res.best_cost is not None and all(c is not None for _, c, _ in res.history)
    perf = RandomTuner(task, seed=0).tune(3, Measurer("perf"), batch_size=3)
    assert perf.best_cost is not None and perf.best_cost > 0


@pytest.mark.sim
@pytest.mark.parametrize("spec", ["conv2d_transpose:H=2,W=2,CI=8,CO=4,K=4,S=2,P=1",
                                  "clip:N=1,C=8,H=4,W=4,LO=3,HI=90",
                                  "group_conv2d:H=4,W=4,CI=16,CO=16,K=3,S=1,P=1,G=2",
                                  "group_conv2d:H=4,W=4,CI=8,CO=8,K=3,S=1,P=1,G=8"])
def test_task_space_holds_the_compilers_default(spec: str, small: Config) -> None:
    """The compiler's default schedule is one of the task's valid candidates, so tuning the
    whole space can only match or beat it."""
    from vta.tune.vta_tasks import default_knobs_cost, measure_perf

    task = parse_workload(spec, small)
    costs = {measure_perf(task.instantiate(task.space.get(i)))
             for i in task.space.valid_indices()}
    assert default_knobs_cost(task) in costs


@pytest.mark.unit
def test_transposed_conv_workload_errors(small: Config) -> None:
    with pytest.raises(WorkloadError, match="padding P=4 is not within 0..K-1=3"):
        parse_workload("conv2d_transpose:P=4", small)
    with pytest.raises(WorkloadError, match="CO=6 is not a multiple of 4"):
        parse_workload("conv2d_transpose:CO=6", small)


@pytest.mark.unit
def test_group_conv_workload_specs(small: Config) -> None:
    """G groups of whole channel tiles, or depthwise (G = CI = CO) as CI/BLOCK groups of one
    block-diagonal tile; anything else is a one-line WorkloadError naming the problem."""
    grouped = parse_workload("group_conv2d:H=4,W=4,CI=16,CO=32,K=3,S=1,P=1,G=2", small)
    assert grouped.name == "vta.group_conv2d"
    assert grouped.args[:-1] == (1, 4, 4, 4, 8, 3, 3, 1, 1, 1, 1, 2)
    dw = parse_workload("group_conv2d:H=4,W=4,CI=8,CO=8,K=3,S=1,P=1,G=8", small)
    assert dw.args[:-1] == (1, 2, 4, 4, 2, 3, 3, 1, 1, 1, 1, 2)  # 8 channels: 2 tiles of 4
    with pytest.raises(WorkloadError, match="G=3 does not divide CI=16 and CO=16"):
        parse_workload("group_conv2d:CI=16,CO=16,G=3", small)
    with pytest.raises(WorkloadError, match="G=0 must be at least 1"):
        parse_workload("group_conv2d:G=0", small)
    with pytest.raises(WorkloadError, match="G=1 is a plain convolution"):
        parse_workload("group_conv2d:G=1", small)
    with pytest.raises(WorkloadError, match="8 groups of 2 input / 2 output channels do not "
                                            "split into whole 4/4-channel tiles"):
        parse_workload("group_conv2d:CI=16,CO=16,G=8", small)
    with pytest.raises(WorkloadError, match="do not split"):  # depthwise, 6 channels
        parse_workload("group_conv2d:CI=6,CO=6,G=6", small)


@pytest.mark.sim
def test_group_conv_tasks_from_mobilenet(tmp_path, small: Config) -> None:
    """MobileNet's depthwise convs are vta.group_conv2d tasks (one per distinct workload), its
    pointwise convs vta.conv2d: no VTA conv layer of the plan is left without a task."""
    import onnx
    from vta.compiler.graph import zoo
    from vta.tune.vta_tasks import layer_task, model_layers, tasks_from_model

    path = tmp_path / "mb.onnx"
    onnx.save(zoo.mobilenet_v1(image_size=32, num_classes=10, width=0.25), str(path))
    layers = model_layers(path, small)
    dws = [la for la in layers if la.template == "conv2d" and la.depthwise]
    assert len(dws) == 13  # the 8-channel dw1 is 2 tiles of 4 at this config
    assert all(layer_task(la, small) is not None for la in layers)
    tasks = tasks_from_model(path, small)
    group = [t for t in tasks if t.name == "vta.group_conv2d"]
    assert len(group) == len({(la.data, la.strides, la.groups) for la in dws}) == 9
    # depthwise: one input and one output tile per group, the groups are the channel tiles
    assert all(t.args[1] == t.args[4] == t.args[11] for t in group)
    assert all(len(t.space.valid_indices()) > 0 for t in group)


@pytest.mark.sim
def test_tasks_of_a_dynamic_size_model_at_a_given_shape(tmp_path, small: Config) -> None:
    """`vta tune MODEL.onnx --input-shape`: a model with symbolic height and width gives, at
    the shape given, the tasks of the same model exported at that size."""
    import onnx
    from vta.compiler.graph import zoo
    from vta.tune.vta_tasks import tasks_from_model

    model = zoo.resnet18(image_size=32, num_classes=10)
    for d in model.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.dim_param = "size"
    dyn, static = tmp_path / "dyn.onnx", tmp_path / "r18_64.onnx"
    onnx.save(model, str(dyn))
    onnx.save(zoo.resnet18(image_size=64, num_classes=10), str(static))
    tasks = tasks_from_model(dyn, small, input_shapes={"": (1, 3, 64, 64)})
    assert [t.key for t in tasks] == [t.key for t in tasks_from_model(static, small)]
    assert {t.args[2] for t in tasks if t.name == "vta.conv2d"} == {16, 8, 4, 2}


@pytest.mark.sim
def test_tuning_tasks_and_autovta_read_the_same_layers(tmp_path, small: Config) -> None:
    """The tuning tasks' layers and AutoVTA's network come from one extraction
    (quantized_model): AutoVTA's conv and dense layers, planned on a configuration, are the
    conv and dense layers `vta tune` plans there, in the same order."""
    import onnx
    from vta.compiler.graph import zoo
    from vta.compiler.graph.lowering import LayerError
    from vta.tune.autovta.network import load_network
    from vta.tune.vta_tasks import model_layers

    path = tmp_path / "mb.onnx"
    onnx.save(zoo.mobilenet_v1(image_size=32, num_classes=10, width=0.25), str(path))
    planned = []
    for layer in load_network(str(path), small, use_cache=False).layers:
        with contextlib.suppress(LayerError):
            planned.append(layer.plan(small))
    tuned = [la for la in model_layers(path, small) if la.template != "elementwise"]
    assert len(planned) == 27 and repr(planned) == repr(tuned)
