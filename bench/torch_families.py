"""The network families people deploy, written in PyTorch without torchvision (its PyPI build
does not import beside the pinned torch), after torchvision's definitions of each block.

One set of blocks serves two sizes of each family:

- :data:`FAMILIES`: the classification families (and a YOLO-style detector) at their usual
  size, for a 224x224 image with 1000 classes; used by ``bench/bench_models.py``;
- :data:`SMALL`: small models of each family's characteristic blocks for a 32x32 image (64 for
  AlexNet's stride-4 stem), 10 classes; exported by both ``torch.onnx`` exporters in
  ``tests/graph/test_graph_torch_export.py`` (its conftest loads this file by path).

:func:`build` seeds the weights and re-estimates batch-norm statistics on random inputs (so that
activations look like a trained network's); some batch norms keep PyTorch's default scale 1 /
shift 0, and the families whose torchvision definitions zero every bias do so here: the
TorchScript exporter then shares those equal initializers through Identity nodes, as it does
for real networks. :func:`export` serializes a model with either exporter.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

Act = Callable[[], nn.Module]


def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, g: int = 1,
            act: Act | None = nn.ReLU) -> nn.Sequential:
    """Conv (no bias) + BatchNorm + activation."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def stem(cout: int, k: int = 7) -> nn.Sequential:
    """ResNet's stem: a stride-2 conv and a stride-2 max pool."""
    return nn.Sequential(conv_bn(3, cout, k, 2), nn.MaxPool2d(3, 2, 1))


def zero_biases(model: nn.Module) -> nn.Module:
    """Every conv / linear bias zero, as torchvision initialises these families (equal zero
    tensors that the TorchScript exporter shares through Identity nodes)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d | nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
    return model


class Classifier(nn.Module):
    """stem -> body -> global average pool -> flatten -> linear (the common head)."""

    def __init__(self, stem: nn.Module, body: nn.Module, c: int, classes: int = 10,
                 dropout: float = 0.0):
        super().__init__()
        self.stem, self.body = stem, body
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.body(self.stem(x)))
        return self.fc(self.drop(torch.flatten(x, 1)))


def mlp_head(cin: int, hidden: Sequence[int], classes: int, dropout_first: bool
             ) -> nn.Sequential:
    """VGG's head (Linear, ReLU, Dropout per hidden layer, then Linear) or AlexNet's
    (``dropout_first``: Dropout, Linear, ReLU)."""
    layers: list[nn.Module] = []
    for h in hidden:
        fc = [nn.Linear(cin, h), nn.ReLU(True)]
        layers += [nn.Dropout(), *fc] if dropout_first else [*fc, nn.Dropout()]
        cin = h
    return nn.Sequential(*layers, nn.Linear(cin, classes))


# ---------------------------------------------------------------- ResNet / ResNeXt
class Bottleneck(nn.Module):
    """ResNet-50 / ResNeXt bottleneck (grouped 3x3 for ResNeXt) with a projection shortcut."""

    def __init__(self, cin: int, width: int, cout: int, stride: int = 1, groups: int = 1):
        super().__init__()
        self.conv1 = conv_bn(cin, width, 1)
        self.conv2 = conv_bn(width, width, 3, stride, groups)
        self.conv3 = conv_bn(width, cout, 1, act=None)
        self.down = (conv_bn(cin, cout, 1, stride, act=None)
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv3(self.conv2(self.conv1(x))) + self.down(x))


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3x3 convs, a projection shortcut where the shape changes."""

    def __init__(self, cin: int, cout: int | None = None, stride: int = 1):
        super().__init__()
        cout = cout or cin
        self.conv1, self.conv2 = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, act=None)
        self.down = (conv_bn(cin, cout, 1, stride, act=None)
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(self.conv1(x)) + self.down(x))


def resnet18(classes: int = 1000) -> nn.Module:
    blocks, i = [], 64
    for k, o in enumerate((64, 128, 256, 512)):
        blocks += [BasicBlock(i, o, 1 if k == 0 else 2), BasicBlock(o)]
        i = o
    return Classifier(stem(64), nn.Sequential(*blocks), 512, classes)


def resnext26_32x4d(classes: int = 1000) -> nn.Module:
    blocks, i = [], 64
    for k in range(4):
        mid, o = 128 << k, 256 << k
        blocks += [Bottleneck(i, mid, o, 1 if k == 0 else 2, 32), Bottleneck(o, mid, o, 1, 32)]
        i = o
    return Classifier(stem(64), nn.Sequential(*blocks), 2048, classes)


# ------------------------------------------------------------------------ MobileNet
def separable(cin: int, cout: int, s: int, act: Act) -> nn.Sequential:
    """MobileNet v1's depthwise 3x3 + pointwise 1x1."""
    return nn.Sequential(conv_bn(cin, cin, 3, s, cin, act), conv_bn(cin, cout, 1, act=act))


def mobilenet_v1(c0: int = 32, cfg: Sequence[tuple[int, int]] = (
        (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
        (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)),
        act: Act = nn.ReLU, classes: int = 1000) -> nn.Module:
    """``cfg``: (output channels, stride) of each separable block."""
    first = conv_bn(3, c0, 3, 2, act=act)
    layers, i = [], c0
    for o, s in cfg:
        layers.append(separable(i, o, s, act))
        i = o
    return Classifier(first, nn.Sequential(*layers), i, classes)


class SqueezeExcite(nn.Module):
    """MobileNet v3 (Hardsigmoid gate, ReLU), EfficientNet (Sigmoid gate, SiLU), RegNetY SE."""

    def __init__(self, c: int, squeeze: int, act: Act, gate: Act):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """MobileNet v2 / MnasNet / EfficientNet / MobileNet v3 block: expand (to ``mid``, by
    default ``cin * expand`` channels), depthwise, optional squeeze-excitation, project;
    residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, k: int = 3,
                 act: Act = nn.ReLU6, se: nn.Module | None = None, mid: int | None = None):
        super().__init__()
        mid = mid or cin * expand
        layers: list[nn.Module] = []
        if mid != cin:
            layers.append(conv_bn(cin, mid, 1, act=act))
        layers.append(conv_bn(mid, mid, k, stride, mid, act))
        if se is not None:
            layers.append(se)
        layers.append(conv_bn(mid, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


def mobilenet_v2(c0: int = 32, cfg: Sequence[tuple[int, int, int, int]] = (
        (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
        (6, 160, 3, 2), (6, 320, 1, 1)), last: int = 1280, classes: int = 1000) -> nn.Module:
    """``cfg``: (expansion, output channels, repeats, first stride) of each stage."""
    layers, i = [], c0
    for e, o, n, s in cfg:
        for j in range(n):
            layers.append(InvertedResidual(i, o, s if j == 0 else 1, e))
            i = o
    layers.append(conv_bn(i, last, 1, act=nn.ReLU6))
    body = nn.Sequential(*layers)
    return Classifier(conv_bn(3, c0, 3, 2, act=nn.ReLU6), body, last, classes, dropout=0.2)


#: MobileNet v3 Small: (kernel, expanded channels, output channels, SE, activation, stride)
V3_SMALL = ((3, 16, 16, True, nn.ReLU, 2), (3, 72, 24, False, nn.ReLU, 2),
            (3, 88, 24, False, nn.ReLU, 1), (5, 96, 40, True, nn.Hardswish, 2),
            (5, 240, 40, True, nn.Hardswish, 1), (5, 240, 40, True, nn.Hardswish, 1),
            (5, 120, 48, True, nn.Hardswish, 1), (5, 144, 48, True, nn.Hardswish, 1),
            (5, 288, 96, True, nn.Hardswish, 2), (5, 576, 96, True, nn.Hardswish, 1),
            (5, 576, 96, True, nn.Hardswish, 1))


class MobileNetV3(nn.Module):
    """Hardswish stem, inverted residuals with Hardsigmoid-gated squeeze-excitation, a
    Hardswish head (``cfg`` as :data:`V3_SMALL`)."""

    def __init__(self, cfg: Sequence[tuple] = V3_SMALL, c0: int = 16, last: int = 576,
                 hidden: int = 1024, classes: int = 1000):
        super().__init__()
        hs = nn.Hardswish
        layers, i = [conv_bn(3, c0, 3, 2, act=hs)], c0
        for k, mid, o, use_se, act, s in cfg:
            se = SqueezeExcite(mid, max(8, mid // 4), nn.ReLU, nn.Hardsigmoid) if use_se else None
            layers.append(InvertedResidual(i, o, s, 1, k, act, se, mid))
            i = o
        layers.append(conv_bn(i, last, 1, act=hs))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last, hidden), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v3_small(classes: int = 1000) -> nn.Module:
    return zero_biases(MobileNetV3(classes=classes))


def efficientnet(c0: int = 32, cfg: Sequence[tuple[int, int, int, int, int]] = (
        (1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2),
        (6, 5, 112, 3, 1), (6, 5, 192, 4, 2), (6, 3, 320, 1, 1)), last: int = 1280,
        classes: int = 1000) -> nn.Module:
    """EfficientNet (B0 by default): SiLU inverted residuals, each with a Sigmoid-gated SE;
    ``cfg``: (expansion, kernel, output channels, repeats, first stride) of each stage."""
    layers, i = [], c0
    for e, k, o, n, s in cfg:
        for j in range(n):
            se = SqueezeExcite(i * e, max(1, i // 4), nn.SiLU, nn.Sigmoid)
            layers.append(InvertedResidual(i, o, s if j == 0 else 1, e, k, nn.SiLU, se))
            i = o
    layers.append(conv_bn(i, last, 1, act=nn.SiLU))
    body = nn.Sequential(*layers)
    return zero_biases(Classifier(conv_bn(3, c0, 3, 2, act=nn.SiLU), body, last, classes,
                                  dropout=0.2))


class MnasNet(nn.Module):
    """MnasNet: a separable first block, ReLU inverted residuals (``cfg``: kernel, output
    channels, repeats, first stride, expansion); the head pools with ``x.mean([2, 3])``
    (ReduceMean over H, W)."""

    def __init__(self, c0: int = 32, c1: int = 16, cfg: Sequence[tuple[int, ...]] = (
            (3, 24, 3, 2, 3), (5, 40, 3, 2, 3), (5, 80, 3, 2, 6), (3, 96, 3, 1, 6),
            (5, 192, 3, 2, 6), (3, 320, 1, 1, 6)), last: int = 1280, classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, c0, 3, 2), InvertedResidual(c0, c1, 1, 1, 3,
                                                                           nn.ReLU)]
        i = c1
        for k, o, n, s, e in cfg:
            for j in range(n):
                layers.append(InvertedResidual(i, o, s if j == 0 else 1, e, k, nn.ReLU))
                i = o
        layers.append(conv_bn(i, last, 1))
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


# ---------------------------------------------------------------------- ShuffleNet v2
def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.stride = stride
        half = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(conv_bn(cin, cin, 3, stride, cin, None),
                                         conv_bn(cin, half, 1))
        bin_ = cin if stride > 1 else half
        self.branch2 = nn.Sequential(conv_bn(bin_, half, 1), conv_bn(half, half, 3, stride,
                                                                     half, None),
                                     conv_bn(half, half, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


def shufflenet_v2(c0: int = 24, k0: int = 7, stages: Sequence[tuple[int, int]] = (
        (116, 4), (232, 8), (464, 4)), last: int = 1024, classes: int = 1000) -> nn.Module:
    """``stages``: (output channels, units) of each stage; its first unit has stride 2."""
    first = stem(c0, k0)
    layers, i = [], c0
    for o, n in stages:
        for j in range(n):
            layers.append(ShuffleUnit(i, o, 2 if j == 0 else 1))
            i = o
    layers.append(conv_bn(i, last, 1))
    return Classifier(first, nn.Sequential(*layers), last, classes)


# ------------------------------------------------------------------------ SqueezeNet
class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1, self.e3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3,
                                                                    padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x))], 1)


def squeezenet(c0: int = 64, pad: int = 0, fires: Sequence[tuple[int, int] | str] = (
        (16, 64), (16, 64), "M", (32, 128), (32, 128), "M", (48, 192), (48, 192), (64, 256),
        (64, 256)), classes: int = 1000) -> nn.Module:
    """SqueezeNet 1.1 by default: ``fires`` lists (squeeze, expand) Fire modules and "M" for a
    ceil-mode max pool."""
    layers: list[nn.Module] = [nn.Conv2d(3, c0, 3, 2, pad), nn.ReLU(),
                               nn.MaxPool2d(3, 2, ceil_mode=True)]
    i = c0
    for f in fires:
        if f == "M":
            layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
        else:
            layers.append(Fire(i, *f))
            i = 2 * f[1]
    return nn.Sequential(*layers, nn.Dropout(0.5), nn.Conv2d(i, classes, 1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten())


# ------------------------------------------------------------------ GoogLeNet / Inception
class Inception(nn.Module):
    """GoogLeNet's block (1x1; 1x1 -> 3x3; 1x1 -> k5 x k5; pool -> 1x1): a ceil-mode max pool
    branch, or Inception v3's average pool (count_include_pad, PyTorch's default)."""

    def __init__(self, cin: int, c1: int, r3: int, c3: int, r5: int, c5: int, cp: int,
                 k5: int = 3, avg: bool = False):
        super().__init__()
        self.b1 = conv_bn(cin, c1, 1)
        self.b3 = nn.Sequential(conv_bn(cin, r3, 1), conv_bn(r3, c3, 3))
        self.b5 = nn.Sequential(conv_bn(cin, r5, 1), conv_bn(r5, c5, k5))
        self.avg = avg
        self.bp = conv_bn(cin, cp, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.avg:
            p = F.avg_pool2d(x, 3, 1, 1)
        else:
            p = F.max_pool2d(x, 3, 1, 1, ceil_mode=True)
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(p)], 1)


def googlenet(classes: int = 1000) -> nn.Module:
    def pool() -> nn.Module:
        return nn.MaxPool2d(3, 2, ceil_mode=True)
    first = nn.Sequential(conv_bn(3, 64, 7, 2), pool(), conv_bn(64, 64, 1), conv_bn(64, 192, 3),
                          pool())
    body = nn.Sequential(Inception(192, 64, 96, 128, 16, 32, 32),
                         Inception(256, 128, 128, 192, 32, 96, 64), pool(),
                         Inception(480, 192, 96, 208, 16, 48, 64),
                         Inception(512, 160, 112, 224, 24, 64, 64),
                         Inception(512, 128, 128, 256, 24, 64, 64),
                         Inception(512, 112, 144, 288, 32, 64, 64),
                         Inception(528, 256, 160, 320, 32, 128, 128),
                         nn.MaxPool2d(2, 2, ceil_mode=True),
                         Inception(832, 256, 160, 320, 32, 128, 128),
                         Inception(832, 384, 192, 384, 48, 128, 128))
    return Classifier(first, body, 1024, classes, dropout=0.4)


# ------------------------------------------------------------------------- DenseNet
class DenseLayer(nn.Module):
    """BN-ReLU-1x1 (4 x growth) -> BN-ReLU-3x3 (growth) of the concatenated earlier features."""

    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.norm1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(feats, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class DenseNet(nn.Module):
    """Dense blocks of ``blocks`` layers, each followed but the last by a transition
    (BN-ReLU-1x1 halving the channels, 2x2 average pool). A block sees the channel counts of
    the one before, so their pre-activation batch norms at scale 1, shift 0 are equal tensors
    that the TorchScript exporter shares through Identity nodes."""

    def __init__(self, c0: int = 64, growth: int = 32, blocks: Sequence[int] = (6, 12, 24, 16),
                 k0: int = 7, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c0, k0, 2, k0 // 2, bias=False),
                                  nn.BatchNorm2d(c0), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.blocks, self.trans = nn.ModuleList(), nn.ModuleList()
        c = c0
        for k, n in enumerate(blocks):
            self.blocks.append(nn.ModuleList(DenseLayer(c + j * growth, growth)
                                             for j in range(n)))
            c += n * growth
            if k < len(blocks) - 1:
                self.trans.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(),
                                                nn.Conv2d(c, c // 2, 1, bias=False),
                                                nn.AvgPool2d(2, 2)))
                c //= 2
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for k, block in enumerate(self.blocks):
            feats = [x]
            for layer in block:
                feats.append(layer(feats))
            x = torch.cat(feats, 1)
            if k < len(self.trans):
                x = self.trans[k](x)
        x = F.relu(self.norm(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def densenet121(classes: int = 1000) -> nn.Module:
    return DenseNet(classes=classes)


# ------------------------------------------------------------------------ VGG / AlexNet
VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG(nn.Module):
    """Plain conv(-BN)-ReLU stacks ("M": 2x2 max pool), an adaptive average pool to
    ``pool`` x ``pool`` (none: the features are ``spatial`` x ``spatial`` already) and the
    dropout/linear head."""

    def __init__(self, cfg: Sequence[int | str] = VGG11, bn: bool = False,
                 pool: int | None = None, spatial: int = 7,
                 hidden: Sequence[int] = (4096, 4096), classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1)] + ([nn.BatchNorm2d(v)] if bn else [])
                layers.append(nn.ReLU(inplace=True))
                cin = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool)) if pool else nn.Identity()
        self.classifier = mlp_head(cin * (pool or spatial) ** 2, hidden, classes, False)
        zero_biases(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class AlexNet(nn.Module):
    """11x11 stride-4 and 5x5 convs with max pools, then 3x3 convs (a last max pool when there
    are three of them, as in the full network)."""

    def __init__(self, widths: Sequence[int] = (64, 192, 384, 256, 256), pool: int | None = None,
                 spatial: int = 6, hidden: Sequence[int] = (4096, 4096), classes: int = 1000):
        super().__init__()
        a, b, *rest = widths
        layers: list[nn.Module] = [nn.Conv2d(3, a, 11, 4, 2), nn.ReLU(True), nn.MaxPool2d(3, 2),
                                   nn.Conv2d(a, b, 5, padding=2), nn.ReLU(True),
                                   nn.MaxPool2d(3, 2)]
        cin = b
        for c in rest:
            layers += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU(True)]
            cin = c
        if len(rest) == 3:
            layers.append(nn.MaxPool2d(3, 2))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool)) if pool else nn.Identity()
        self.classifier = mlp_head(cin * (pool or spatial) ** 2, hidden, classes, True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the activation is flattened the way older code does it: x.view(x.size(0), -1)
        x = self.avgpool(self.features(x))
        return self.classifier(x.view(x.size(0), -1))


# --------------------------------------------------------------------------- RegNet
class RegNetBlock(nn.Module):
    """RegNet's block: 1x1, grouped 3x3 (``group_width`` channels a group), squeeze-excitation
    (RegNetY; none for RegNetX), 1x1; residual."""

    def __init__(self, cin: int, cout: int, stride: int, group_width: int = 8,
                 se: bool = True):
        super().__init__()
        self.a = conv_bn(cin, cout, 1)
        self.b = conv_bn(cout, cout, 3, stride, cout // group_width)
        self.se = SqueezeExcite(cout, cin // 4, nn.ReLU, nn.Sigmoid) if se else nn.Identity()
        self.c = conv_bn(cout, cout, 1, act=None)
        self.proj = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(self.se(self.b(self.a(x))))
        return F.relu(y + (self.proj(x) if self.proj is not None else x))


def regnet_x_400mf(classes: int = 1000) -> nn.Module:
    layers, i = [], 32
    for o, n in ((32, 1), (64, 2), (160, 7), (400, 12)):
        for j in range(n):
            layers.append(RegNetBlock(i, o, 2 if j == 0 else 1, 16, se=False))
            i = o
    return zero_biases(Classifier(conv_bn(3, 32, 3, 2), nn.Sequential(*layers), i, classes))


# ------------------------------------------------------------------------- ConvNeXt
class LayerNorm2d(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gelu = nn.GELU()
        self.layer_scale = nn.Parameter(torch.full((c, 1, 1), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(self.gelu(self.pw1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.layer_scale * y


class ConvNeXt(nn.Module):
    """Patchify stem, stages of NHWC blocks (depthwise 7x7, LayerNorm, GELU MLP, layer scale),
    LayerNorm + 2x2 stride-2 downsampling between stages, normalized pooled head."""

    def __init__(self, dims: Sequence[int] = (80, 160, 320, 640),
                 depths: Sequence[int] = (2, 2, 4, 2), classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))
        self.stages, self.downs = nn.ModuleList(), nn.ModuleList()
        for k, (d, n) in enumerate(zip(dims, depths)):
            if k:
                self.downs.append(nn.Sequential(LayerNorm2d(dims[k - 1], eps=1e-6),
                                                nn.Conv2d(dims[k - 1], d, 2, 2)))
            self.stages.append(nn.Sequential(*(CNBlock(d) for _ in range(n))))
        self.head_norm = LayerNorm2d(dims[-1], eps=1e-6)
        self.fc = nn.Linear(dims[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages[0](self.stem(x))
        for down, stage in zip(self.downs, self.stages[1:]):
            x = stage(down(x))
        x = self.head_norm(F.adaptive_avg_pool2d(x, 1))
        return self.fc(torch.flatten(x, 1))


# ------------------------------------------------------------------------ YOLO-style
def cbl(cin: int, cout: int, k: int = 3, s: int = 1) -> nn.Module:
    return conv_bn(cin, cout, k, s, act=lambda: nn.LeakyReLU(0.1))


class Yolo(nn.Module):
    """A YOLO-style detector: space-to-depth "focus" slices, LeakyReLU conv blocks, a CSP-like
    split by channel slices, an upsampling neck (nearest, or bilinear) with concatenation, a
    max-pooled SPP branch, and a head reshaped to (anchors, outputs, H, W) and permuted.
    ``width``: channels of the first block (the others are multiples of it); ``outputs``:
    box (4), objectness (1) and class scores of each anchor."""

    def __init__(self, mode: str = "nearest", width: int = 16, anchors: int = 3,
                 outputs: int = 7):
        super().__init__()
        w = width
        self.mode, self.width, self.anchors, self.outputs = mode, w, anchors, outputs
        self.focus = cbl(12, w)
        self.c1 = cbl(w, 2 * w, 3, 2)
        self.c2 = cbl(w, w)
        self.c3 = cbl(2 * w, 4 * w, 3, 2)
        self.spp = cbl(8 * w, 4 * w, 1)
        self.lat = cbl(4 * w, 2 * w, 1)
        self.neck = cbl(4 * w, 2 * w)
        self.prelu = nn.PReLU(2 * w)
        self.head = nn.Conv2d(2 * w, anchors * outputs, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                       x[..., 1::2, 1::2]], 1)
        p3 = self.c1(self.focus(x))
        a, b = p3[:, :self.width], p3[:, self.width:]
        p3 = torch.cat([a, self.c2(b)], 1)
        p4 = self.c3(p3)
        p4 = self.spp(torch.cat([p4, F.max_pool2d(p4, 5, 1, 2)], 1))
        up = F.interpolate(self.lat(p4), scale_factor=2.0, mode=self.mode,
                           align_corners=False if self.mode == "bilinear" else None)
        y = self.prelu(self.neck(torch.cat([up, p3], 1)))
        y = self.head(y)
        n, _, h, w = y.shape
        y = y.view(n, self.anchors, self.outputs, h, w).permute(0, 1, 3, 4, 2)
        return torch.sigmoid(y)


# ------------------------------------------------------------------------ registries
#: The families at their usual size (224x224 input, 1000 classes; COCO's 80 for the detector).
FAMILIES: dict[str, Callable[[], nn.Module]] = {
    "resnet18": resnet18, "resnext26_32x4d": resnext26_32x4d, "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2, "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet, "mnasnet1_0": MnasNet,
    "shufflenet_v2_x1_0": shufflenet_v2, "squeezenet1_1": squeezenet, "googlenet": googlenet,
    "densenet121": densenet121, "vgg11": VGG, "alexnet": AlexNet,
    "regnet_x_400mf": regnet_x_400mf, "convnext_nano": ConvNeXt,
    "yolo": lambda: Yolo(width=32, outputs=85),
}


def _small_resnext() -> nn.Module:
    body = nn.Sequential(Bottleneck(16, 64, 64, 1, groups=4), Bottleneck(64, 64, 64, 2, 4))
    return Classifier(conv_bn(3, 16, 3, 2), body, 64)


def _small_regnet() -> nn.Module:
    body = nn.Sequential(RegNetBlock(16, 32, 2), RegNetBlock(32, 32, 1))
    return zero_biases(Classifier(conv_bn(3, 16, 3, 2), body, 32))


#: Each family's characteristic blocks at test size (10 classes).
SMALL: dict[str, Callable[[], nn.Module]] = {
    "resnet": lambda: Classifier(stem(16), nn.Sequential(BasicBlock(16),
                                                         Bottleneck(16, 16, 64, 2)), 64),
    "resnext": _small_resnext,
    "mobilenet_v1": lambda: mobilenet_v1(16, ((32, 1), (64, 2), (64, 1)), nn.ReLU6, 10),
    "mobilenet_v2": lambda: mobilenet_v2(16, ((1, 16, 1, 1), (6, 24, 2, 2)), 64, 10),
    "mobilenet_v3": lambda: zero_biases(MobileNetV3(
        ((3, 16, 16, True, nn.ReLU, 2), (5, 64, 24, True, nn.Hardswish, 1)), 16, 96, 128, 10)),
    "efficientnet": lambda: efficientnet(16, ((1, 3, 16, 1, 1), (6, 3, 24, 1, 2),
                                              (6, 5, 24, 1, 1)), 64, 10),
    "mnasnet": lambda: MnasNet(16, 16, ((5, 24, 2, 2, 3),), 64, 10),
    "shufflenet_v2": lambda: shufflenet_v2(16, 3, ((32, 2),), 64, 10),
    "squeezenet": lambda: squeezenet(32, 1, ((16, 32), (16, 32), "M", (16, 48)), 10),
    "inception": lambda: Classifier(
        nn.Sequential(conv_bn(3, 32, 3, 2), nn.MaxPool2d(3, 2, ceil_mode=True)),
        nn.Sequential(Inception(32, 16, 16, 32, 4, 8, 8, 5), nn.MaxPool2d(3, 2, ceil_mode=True),
                      Inception(64, 16, 16, 32, 4, 8, 8, 5, avg=True)), 64, dropout=0.4),
    "densenet": lambda: DenseNet(16, 8, (2, 2), 3, 10),
    "vgg": lambda: VGG((16, "M", 32, "M", 64, 64, "M"), True, 2, hidden=(128, 128),
                       classes=10),
    "alexnet": lambda: AlexNet((32, 48, 64), 3, hidden=(128,), classes=10),
    "regnet": _small_regnet,
    "convnext": lambda: ConvNeXt((16, 32), (1, 1), 10),
    "yolo": lambda: Yolo("nearest"),
    "yolo_bilinear": lambda: Yolo("bilinear"),
}

#: Input size of the small models (AlexNet's stride-4 11x11 stem needs a larger image).
SMALL_SIZES = {"alexnet": 64}


def input_size(name: str, small: bool = False) -> int:
    return SMALL_SIZES.get(name, 32) if small else 224


def settle_batchnorm(model: nn.Module, size: int, batches: int = 4) -> nn.Module:
    """Re-estimate every BatchNorm's statistics on random (8, 3, size, size) inputs (a
    cumulative average over the batches), then switch to inference mode."""
    model.train()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(8, 3, size, size))
    return model.eval()


def build(name: str, seed: int = 0, *, small: bool = False, size: int | None = None
          ) -> nn.Module:
    """The family's model (:data:`SMALL` if ``small`` else :data:`FAMILIES`) with seeded
    weights and batch-norm statistics re-estimated on random inputs, in eval mode."""
    torch.manual_seed(seed)
    model = (SMALL if small else FAMILIES)[name]()
    return settle_batchnorm(model, size or input_size(name, small))


def export(model: nn.Module, size: int, *, dynamo: bool, opset: int | None = None,
           dynamic_batch: bool = False, dynamic_size: bool = False, fold: bool = True) -> bytes:
    """``torch.onnx.export`` of a (1, 3, size, size) input, serialized; ``dynamic_batch``
    exports a symbolic batch dimension, ``dynamic_size`` symbolic height and width (the graph
    then computes shapes at run time); ``fold=False`` is the TorchScript exporter without its
    constant folding (batch norms stay, weights are also listed as graph inputs)."""
    # (torch.export specializes a dynamic dimension whose example size is 1)
    side = 2 * size if dynamic_size and dynamo else size
    x = torch.randn(2 if dynamic_batch and dynamo else 1, 3, side, side)
    buf = io.BytesIO()
    kw: dict = {"opset_version": opset} if opset else {}
    if dynamo:
        dims = {0: torch.export.Dim("batch", min=1, max=64)} if dynamic_batch else {}
        if dynamic_size:  # multiples of 32: every stride-2 stage keeps an even size
            dims.update({2: 32 * torch.export.Dim("h32", min=1, max=32),
                         3: 32 * torch.export.Dim("w32", min=1, max=32)})
        if dims:
            kw["dynamic_shapes"] = (dims,)
        prog = torch.onnx.export(model, (x,), dynamo=True, verbose=False, **kw)
        return prog.model_proto.SerializeToString()
    dims = ({0: "batch"} if dynamic_batch else {}) | ({2: "height", 3: "width"}
                                                      if dynamic_size else {})
    if dims:
        kw["dynamic_axes"] = {"input": dims, "output": {0: "batch"} if dynamic_batch else {}}
    if not fold:
        kw.update(do_constant_folding=False, keep_initializers_as_inputs=True)
    torch.onnx.export(model, (x,), buf, dynamo=False, input_names=["input"],
                      output_names=["output"], **kw)
    return buf.getvalue()
