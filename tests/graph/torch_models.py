"""Small PyTorch models of the characteristic blocks of the network families people deploy.

Written here (not taken from torchvision, which does not import beside the pinned torch) after
torchvision's definitions of each block. Every model takes a (1, 3, S, S) image; weights are
seeded, batch-norm statistics are re-estimated on random inputs (so activations look like a
trained network's), and some batch norms keep PyTorch's default scale 1 / shift 0 so that the
TorchScript exporter shares those equal initializers through Identity nodes, as it does for
real networks.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, g: int = 1,
            act: Callable[[], nn.Module] | None = nn.ReLU) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=g, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


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
    def __init__(self, c: int):
        super().__init__()
        self.conv1, self.conv2 = conv_bn(c, c), conv_bn(c, c, act=None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(self.conv1(x)) + x)


def resnet() -> nn.Module:
    stem = nn.Sequential(conv_bn(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1))
    body = nn.Sequential(BasicBlock(16), Bottleneck(16, 16, 64, 2))
    return Classifier(stem, body, 64)


def resnext() -> nn.Module:
    body = nn.Sequential(Bottleneck(16, 64, 64, 1, groups=4), Bottleneck(64, 64, 64, 2, 4))
    return Classifier(conv_bn(3, 16, 3, 2), body, 64)


# ------------------------------------------------------------------------ MobileNet
def mobilenet_v1() -> nn.Module:
    def dw(cin: int, cout: int, s: int) -> nn.Module:
        return nn.Sequential(conv_bn(cin, cin, 3, s, cin, nn.ReLU6), conv_bn(cin, cout, 1,
                                                                               act=nn.ReLU6))
    return Classifier(conv_bn(3, 16, 3, 2, act=nn.ReLU6),
                      nn.Sequential(dw(16, 32, 1), dw(32, 64, 2), dw(64, 64, 1)), 64)


class InvertedResidual(nn.Module):
    """MobileNet v2 / MnasNet / EfficientNet / MobileNet v3 block: expand, depthwise,
    optional squeeze-excitation, project; residual when shapes allow."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, k: int = 3,
                 act: Callable[[], nn.Module] = nn.ReLU6, se: nn.Module | None = None):
        super().__init__()
        mid = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
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


class SqueezeExcite(nn.Module):
    """MobileNet v3 (Hardsigmoid gate, ReLU) and EfficientNet (Sigmoid gate, SiLU) SE."""

    def __init__(self, c: int, squeeze: int, act: Callable[[], nn.Module],
                 gate: Callable[[], nn.Module]):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


def mobilenet_v2() -> nn.Module:
    body = nn.Sequential(InvertedResidual(16, 16, 1, 1), InvertedResidual(16, 24, 2, 6),
                         InvertedResidual(24, 24, 1, 6), conv_bn(24, 64, 1, act=nn.ReLU6))
    return Classifier(conv_bn(3, 16, 3, 2, act=nn.ReLU6), body, 64, dropout=0.2)


class MobileNetV3(nn.Module):
    def __init__(self):
        super().__init__()
        hs = nn.Hardswish
        self.features = nn.Sequential(
            conv_bn(3, 16, 3, 2, act=hs),
            InvertedResidual(16, 16, 2, 1, act=nn.ReLU,
                             se=SqueezeExcite(16, 8, nn.ReLU, nn.Hardsigmoid)),
            InvertedResidual(16, 24, 1, 4, 5, act=hs,
                             se=SqueezeExcite(64, 16, nn.ReLU, nn.Hardsigmoid)),
            conv_bn(24, 96, 1, act=hs))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(96, 128), nn.Hardswish(), nn.Dropout(0.2),
                                        nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v3() -> nn.Module:
    return MobileNetV3()


def efficientnet() -> nn.Module:
    def mb(cin: int, cout: int, s: int, e: int, k: int) -> nn.Module:
        return InvertedResidual(cin, cout, s, e, k, nn.SiLU,
                                SqueezeExcite(cin * e, max(1, cin // 4), nn.SiLU, nn.Sigmoid))
    body = nn.Sequential(mb(16, 16, 1, 1, 3), mb(16, 24, 2, 6, 3), mb(24, 24, 1, 6, 5),
                         conv_bn(24, 64, 1, act=nn.SiLU))
    return Classifier(conv_bn(3, 16, 3, 2, act=nn.SiLU), body, 64, dropout=0.2)


class MnasNet(nn.Module):
    """MnasNet's head pools with ``x.mean([2, 3])`` (ReduceMean over H, W)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(conv_bn(3, 16, 3, 2), InvertedResidual(16, 16, 1, 1, 3,
                                                                           nn.ReLU),
                                    InvertedResidual(16, 24, 2, 3, 5, nn.ReLU),
                                    InvertedResidual(24, 24, 1, 3, 5, nn.ReLU),
                                    conv_bn(24, 64, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


def mnasnet() -> nn.Module:
    return MnasNet()


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


def shufflenet_v2() -> nn.Module:
    stem = nn.Sequential(conv_bn(3, 16, 3, 2), nn.MaxPool2d(3, 2, 1))
    body = nn.Sequential(ShuffleUnit(16, 32, 2), ShuffleUnit(32, 32, 1), conv_bn(32, 64, 1))
    return Classifier(stem, body, 64)


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


def squeezenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 2, 1), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(32, 16, 32), Fire(64, 16, 32), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 48), nn.Dropout(0.5), nn.Conv2d(96, 10, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten())


# ------------------------------------------------------------------ GoogLeNet / Inception
class Inception(nn.Module):
    """GoogLeNet's block (ceil-mode max pool branch) and Inception v3's average-pool branch
    (count_include_pad, PyTorch's default)."""

    def __init__(self, cin: int, c1: int, c3: int, c5: int, cp: int, avg: bool):
        super().__init__()
        self.b1 = conv_bn(cin, c1, 1)
        self.b3 = nn.Sequential(conv_bn(cin, c3 // 2, 1), conv_bn(c3 // 2, c3, 3))
        self.b5 = nn.Sequential(conv_bn(cin, c5 // 2, 1), conv_bn(c5 // 2, c5, 5))
        self.avg = avg
        self.bp = conv_bn(cin, cp, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.avg:
            p = F.avg_pool2d(x, 3, 1, 1)
        else:
            p = F.max_pool2d(x, 3, 1, 1, ceil_mode=True)
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(p)], 1)


def inception() -> nn.Module:
    stem = nn.Sequential(conv_bn(3, 32, 3, 2), nn.MaxPool2d(3, 2, ceil_mode=True))
    body = nn.Sequential(Inception(32, 16, 32, 8, 8, False), nn.MaxPool2d(3, 2, ceil_mode=True),
                         Inception(64, 16, 32, 8, 8, True))
    return Classifier(stem, body, 64, dropout=0.4)


# ------------------------------------------------------------------------- DenseNet
class DenseLayer(nn.Module):
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
    """Two dense blocks around a transition; the second block sees the channel counts of the
    first, so their pre-activation batch norms (scale 1, shift 0) are equal tensors that the
    TorchScript exporter shares through Identity nodes."""

    def __init__(self, c0: int = 16, growth: int = 8, layers: int = 2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c0, 3, 2, 1, bias=False), nn.BatchNorm2d(c0),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block1 = nn.ModuleList(DenseLayer(c0 + k * growth, growth) for k in range(layers))
        c = c0 + layers * growth
        self.trans = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c0, 1,
                                                                           bias=False),
                                   nn.AvgPool2d(2, 2))
        self.block2 = nn.ModuleList(DenseLayer(c0 + k * growth, growth) for k in range(layers))
        self.norm = nn.BatchNorm2d(c)
        self.fc = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        feats = [self.stem(x)]
        for layer in self.block1:
            feats.append(layer(feats))
        feats = [self.trans(torch.cat(feats, 1))]
        for layer in self.block2:
            feats.append(layer(feats))
        x = F.relu(self.norm(torch.cat(feats, 1)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def densenet() -> nn.Module:
    return DenseNet()


# ------------------------------------------------------------------------ VGG / AlexNet
class VGG(nn.Module):
    """Plain conv-ReLU stacks and the dropout/linear head (through an adaptive pool to 2x2)."""

    def __init__(self, bn: bool = False):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in (16, "M", 32, "M", 64, 64, "M"):
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1)] + ([nn.BatchNorm2d(v)] if bn else [])
                layers.append(nn.ReLU(inplace=True))
                cin = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Linear(64 * 4, 128), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(128, 128), nn.ReLU(True), nn.Dropout(),
                                        nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def vgg() -> nn.Module:
    return VGG(bn=True)


class AlexNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 11, 4, 2), nn.ReLU(True), nn.MaxPool2d(3, 2),
            nn.Conv2d(32, 48, 5, padding=2), nn.ReLU(True), nn.MaxPool2d(3, 2),
            nn.Conv2d(48, 64, 3, padding=1), nn.ReLU(True))
        self.avgpool = nn.AdaptiveAvgPool2d((3, 3))
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(64 * 9, 128), nn.ReLU(True),
                                        nn.Linear(128, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the activation is flattened the way older code does it: x.view(x.size(0), -1)
        x = self.avgpool(self.features(x))
        return self.classifier(x.view(x.size(0), -1))


def alexnet() -> nn.Module:
    return AlexNet()


# --------------------------------------------------------------------------- RegNet
class RegNetBlock(nn.Module):
    """RegNetY: 1x1, grouped 3x3 (group width 8), squeeze-excitation, 1x1; residual."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.a = conv_bn(cin, cout, 1)
        self.b = conv_bn(cout, cout, 3, stride, cout // 8)
        self.se = SqueezeExcite(cout, cin // 4, nn.ReLU, nn.Sigmoid)
        self.c = conv_bn(cout, cout, 1, act=None)
        self.proj = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout \
            else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(self.se(self.b(self.a(x))))
        return F.relu(y + (self.proj(x) if self.proj is not None else x))


def regnet() -> nn.Module:
    body = nn.Sequential(RegNetBlock(16, 32, 2), RegNetBlock(32, 32, 1))
    return Classifier(conv_bn(3, 16, 3, 2), body, 32)


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
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 4, 4), LayerNorm2d(16, eps=1e-6))
        self.stage1 = CNBlock(16)
        self.down = nn.Sequential(LayerNorm2d(16, eps=1e-6), nn.Conv2d(16, 32, 2, 2))
        self.stage2 = CNBlock(32)
        self.head_norm = LayerNorm2d(32, eps=1e-6)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        x = self.head_norm(F.adaptive_avg_pool2d(x, 1))
        return self.fc(torch.flatten(x, 1))


def convnext() -> nn.Module:
    return ConvNeXt()


# ------------------------------------------------------------------------ YOLO-style
def cbl(cin: int, cout: int, k: int = 3, s: int = 1) -> nn.Module:
    return conv_bn(cin, cout, k, s, act=lambda: nn.LeakyReLU(0.1))


class Yolo(nn.Module):
    """A YOLO-style detector: space-to-depth "focus" slices, LeakyReLU conv blocks, a CSP-like
    split by channel slices, an upsampling neck (nearest, or bilinear) with concatenation, a
    max-pooled SPP branch, and a head reshaped to (anchors, outputs, H, W) and permuted."""

    def __init__(self, mode: str = "nearest"):
        super().__init__()
        self.mode = mode
        self.focus = cbl(12, 16)
        self.c1 = cbl(16, 32, 3, 2)
        self.c2 = cbl(16, 16)
        self.c3 = cbl(32, 64, 3, 2)
        self.spp = cbl(128, 64, 1)
        self.lat = cbl(64, 32, 1)
        self.neck = cbl(64, 32)
        self.prelu = nn.PReLU(32)
        self.head = nn.Conv2d(32, 3 * 7, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
                       x[..., 1::2, 1::2]], 1)
        p3 = self.c1(self.focus(x))
        a, b = p3[:, :16], p3[:, 16:]
        p3 = torch.cat([a, self.c2(b)], 1)
        p4 = self.c3(p3)
        p4 = self.spp(torch.cat([p4, F.max_pool2d(p4, 5, 1, 2)], 1))
        up = F.interpolate(self.lat(p4), scale_factor=2.0, mode=self.mode,
                           align_corners=False if self.mode == "bilinear" else None)
        y = self.prelu(self.neck(torch.cat([up, p3], 1)))
        y = self.head(y)
        n, _, h, w = y.shape
        y = y.view(n, 3, 7, h, w).permute(0, 1, 3, 4, 2)
        return torch.sigmoid(y)


def yolo() -> nn.Module:
    return Yolo("nearest")


def yolo_bilinear() -> nn.Module:
    return Yolo("bilinear")


FAMILIES: dict[str, Callable[[], nn.Module]] = {
    "resnet": resnet, "resnext": resnext, "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2, "mobilenet_v3": mobilenet_v3, "efficientnet": efficientnet,
    "mnasnet": mnasnet, "shufflenet_v2": shufflenet_v2, "squeezenet": squeezenet,
    "inception": inception, "densenet": densenet, "vgg": vgg, "alexnet": alexnet,
    "regnet": regnet, "convnext": convnext, "yolo": yolo, "yolo_bilinear": yolo_bilinear,
}

#: Input size per family (AlexNet's stride-4 11x11 stem needs a larger image).
SIZES = {"alexnet": 64}

#: Families whose torchvision definitions initialise every conv / linear bias to zero (equal
#: zero tensors that the TorchScript exporter shares through Identity nodes).
ZERO_BIAS = {"vgg", "efficientnet", "mobilenet_v3", "regnet"}


def build(name: str, seed: int = 0) -> nn.Module:
    """The family's model with seeded weights and batch-norm statistics re-estimated on random
    inputs, in eval mode."""
    torch.manual_seed(seed)
    model = FAMILIES[name]()
    size = SIZES.get(name, 32)
    if name in ZERO_BIAS:
        for m in model.modules():
            if isinstance(m, nn.Conv2d | nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
    model.train()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the estimation batches
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, size, size))
    return model.eval()


def export(model: nn.Module, size: int, *, dynamo: bool, opset: int | None = None,
           dynamic_batch: bool = False, fold: bool = True) -> bytes:
    """``torch.onnx.export`` of a (1, 3, size, size) input, serialized; ``dynamic_batch``
    exports a symbolic batch dimension (the graph then computes shapes at run time);
    ``fold=False`` is the TorchScript exporter without its constant folding (batch norms stay,
    weights are also listed as graph inputs)."""
    x = torch.randn(2 if dynamic_batch and dynamo else 1, 3, size, size)
    buf = io.BytesIO()
    kw: dict = {"opset_version": opset} if opset else {}
    if dynamo:
        if dynamic_batch:
            kw["dynamic_shapes"] = ({0: torch.export.Dim("batch", min=1, max=64)},)
        prog = torch.onnx.export(model, (x,), dynamo=True, verbose=False, **kw)
        return prog.model_proto.SerializeToString()
    if dynamic_batch:
        kw["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    if not fold:
        kw.update(do_constant_folding=False, keep_initializers_as_inputs=True)
    torch.onnx.export(model, (x,), buf, dynamo=False, input_names=["input"],
                      output_names=["output"], **kw)
    return buf.getvalue()
