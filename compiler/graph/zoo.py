"""Model zoo: ONNX builders of well-known networks with seeded random weights.

Nothing is downloaded. Weights use He (Kaiming) initialisation and batch-norm statistics are drawn
so that activations stay of order one through the whole network, which keeps a calibrated int8
quantization meaningful. (Batch-norm statistics measured on random data were tried: they make
the small test-size networks ill-conditioned, so the drawn statistics stay.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ModelError

OPSET = 13


class _Builder:
    """Accumulates ONNX nodes and initializers with unique names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count: dict[str, int] = {}

    def uniq(self, base: str) -> str:
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def param(self, name: str, a: np.ndarray) -> str:
        # deferred: onnx is a heavy import, made only when a model is read
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def node(self, op: str, ins: list[str], name: str, **attrs: Any) -> str:
        # deferred: onnx is a heavy import, made only when a model is read
        from onnx import helper

        out = f"{name}.out"
        self.nodes.append(helper.make_node(op, ins, [out], name=name, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int | None = None,
             group: int = 1, bias: bool = False, name: str = "conv") -> str:
        name = self.uniq(name)
        pad = k // 2 if pad is None else pad
        fan_in = cin // group * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, k, k))
        ins = [x, self.param(f"{name}.weight", w)]
        if bias:
            ins.append(self.param(f"{name}.bias", self.rng.normal(0, 0.05, cout)))
        return self.node("Conv", ins, name, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, x: str, c: int, name: str = "bn", gamma: float = 1.0) -> str:
        name = self.uniq(name)
        r = self.rng
        ins = [x, self.param(f"{name}.weight", gamma * r.uniform(0.7, 1.1, c)),
               self.param(f"{name}.bias", r.normal(0, 0.1, c)),
               self.param(f"{name}.running_mean", r.normal(0, 0.1, c)),
               self.param(f"{name}.running_var", r.uniform(0.8, 1.5, c))]
        return self.node("BatchNormalization", ins, name, epsilon=1e-5)

    def relu(self, x: str, name: str = "relu") -> str:
        return self.node("Relu", [x], self.uniq(name))

    def model(self, x_name: str, x_shape: list[int], out: str, out_shape: list[int],
              name: str) -> Any:
        # deferred: onnx is a heavy import, made only when a model is read
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="vta-kit zoo")
        m.ir_version = 8
        return m


def resnet18(image_size: int = 224, num_classes: int = 1000, seed: int = 0,
             batch: int = 1) -> Any:
    """ResNet-18 (He et al. 2016) with torchvision's layer structure, as an ONNX model."""
    b = _Builder(seed)
    x = "input"
    y = b.relu(b.bn(b.conv(x, 3, 64, 7, 2, 3, name="conv1"), 64, "bn1"))
    y = b.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for blk in range(2):
            stride = 2 if stage > 1 and blk == 0 else 1
            pre = f"layer{stage}.{blk}"
            h = b.relu(b.bn(b.conv(y, cin, cout, 3, stride, name=f"{pre}.conv1"), cout,
                            f"{pre}.bn1"), f"{pre}.relu1")
            # a small last-BN gamma keeps the residual stream bounded (as zero-init does)
            h = b.bn(b.conv(h, cout, cout, 3, 1, name=f"{pre}.conv2"), cout, f"{pre}.bn2",
                     gamma=0.5)
            if stride != 1 or cin != cout:
                sc = b.bn(b.conv(y, cin, cout, 1, stride, 0, name=f"{pre}.downsample.0"), cout,
                          f"{pre}.downsample.1")
            else:
                sc = y
            y = b.relu(b.node("Add", [h, sc], f"{pre}.add"), f"{pre}.relu2")
            cin = cout
    y = b.node("GlobalAveragePool", [y], "avgpool")
    y = b.node("Flatten", [y], "flatten", axis=1)
    w = b.rng.normal(0, np.sqrt(1.0 / 512), (num_classes, 512))
    y = b.node("Gemm", [y, b.param("fc.weight", w),
                        b.param("fc.bias", b.rng.normal(0, 0.01, num_classes))],
               "fc", transB=1)
    return b.model(x, [batch, 3, image_size, image_size], y, [batch, num_classes], "resnet18")


def mobilenet_v1(image_size: int = 224, num_classes: int = 1000, width: float = 1.0,
                 seed: int = 0, batch: int = 1) -> Any:
    """MobileNet-v1 (Howard et al. 2017): depthwise separable convolutions (group convs)."""
    b = _Builder(seed)

    def ch(c: int) -> int:
        return max(8, int(c * width))

    cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
           (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]
    c0 = ch(32)
    y = b.relu(b.bn(b.conv("input", 3, c0, 3, 2, name="conv0"), c0, "bn0"))
    cin = c0
    for k, (cout, stride) in enumerate(cfg, start=1):
        cout = ch(cout)
        y = b.relu(b.bn(b.conv(y, cin, cin, 3, stride, group=cin, name=f"dw{k}"), cin,
                        f"dw{k}.bn"))
        y = b.relu(b.bn(b.conv(y, cin, cout, 1, 1, 0, name=f"pw{k}"), cout, f"pw{k}.bn"))
        cin = cout
    y = b.node("GlobalAveragePool", [y], "avgpool")
    y = b.node("Flatten", [y], "flatten", axis=1)
    w = b.rng.normal(0, np.sqrt(1.0 / cin), (num_classes, cin))
    y = b.node("Gemm", [y, b.param("fc.weight", w),
                        b.param("fc.bias", b.rng.normal(0, 0.01, num_classes))],
               "fc", transB=1)
    y = b.node("Softmax", [y], "softmax", axis=1)
    return b.model("input", [batch, 3, image_size, image_size], y, [batch, num_classes],
                   "mobilenet_v1")


def dcgan_generator(nz: int = 100, ngf: int = 64, channels: int = 3, seed: int = 0,
                    batch: int = 1) -> Any:
    """The DCGAN generator (Radford et al. 2016): z (nz x 1 x 1) -> 64 x 64 image."""
    b = _Builder(seed)

    def convt(x: str, cin: int, cout: int, stride: int, pad: int, name: str) -> str:
        name = b.uniq(name)
        # He init for a transposed conv: each output sums cin * (k/stride)^2 terms
        fan = cin * 16 // (stride * stride)
        w = b.rng.normal(0, np.sqrt(2.0 / fan), (cin, cout, 4, 4))
        return b.node("ConvTranspose", [x, b.param(f"{name}.weight", w)], name,
                      kernel_shape=[4, 4], strides=[stride, stride], pads=[pad] * 4)

    y = "z"
    chans = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
    for k in range(4):
        y = convt(y, chans[k], chans[k + 1], 1 if k == 0 else 2, 0 if k == 0 else 1,
                  f"convt{k}")
        y = b.relu(b.bn(y, chans[k + 1], f"bn{k}"))
    y = convt(y, ngf, channels, 2, 1, "convt4")
    y = b.node("Tanh", [y], "tanh")
    return b.model("z", [batch, nz, 1, 1], y, [batch, channels, 64, 64], "dcgan_generator")


@dataclass(frozen=True)
class ZooEntry:
    name: str
    build: Callable[..., Any]
    description: str
    input_shape: Callable[..., tuple[int, ...]]


ZOO: dict[str, ZooEntry] = {
    "resnet18": ZooEntry("resnet18", resnet18, "ResNet-18, 224x224x3 -> 1000 classes",
                         lambda image_size=224, **_: (1, 3, image_size, image_size)),
    "mobilenet_v1": ZooEntry("mobilenet_v1", mobilenet_v1,
                             "MobileNet-v1 1.0, 224x224x3 -> 1000 classes (depthwise convs)",
                             lambda image_size=224, **_: (1, 3, image_size, image_size)),
    "dcgan": ZooEntry("dcgan", dcgan_generator,
                      "DCGAN generator, z (100x1x1) -> 64x64x3 image (transposed convs)",
                      lambda nz=100, **_: (1, nz, 1, 1)),
}


def build(name: str, **kwargs: Any) -> Any:
    """The ONNX ModelProto of a zoo network (kwargs: image_size, num_classes, seed, ...)."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; choose one of {', '.join(ZOO)}")
    try:
        return ZOO[name].build(**kwargs)
    except TypeError as e:
        raise ModelError(f"zoo model {name}: {e}") from None
