"""The classification families people deploy, written in PyTorch without torchvision (its PyPI
build does not import beside the pinned torch): each family's characteristic blocks at the
usual 224x224 size. Used by bench_models.py; weights are random, batch-norm statistics are
re-estimated on random inputs (:func:`settle_batchnorm`) so that activations look trained.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


def cbr(i: int, o: int, k: int = 3, s: int = 1, g: int = 1, act: type[nn.Module] | None
        = nn.ReLU, p: int | None = None) -> nn.Sequential:
    """Conv (no bias) + BatchNorm + activation."""
    layers: list[nn.Module] = [nn.Conv2d(i, o, k, s, k // 2 if p is None else p, groups=g,
                                         bias=False), nn.BatchNorm2d(o)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class Classifier(nn.Module):
    def __init__(self, features: nn.Module, ch: int, classes: int = 1000,
                 hidden: tuple[int, ...] = (), pool: bool = True) -> None:
        super().__init__()
        self.features, self.pool = features, pool
        dims = (ch, *hidden)
        self.fc = nn.Sequential(*[m for a, b in zip(dims, dims[1:])
                                  for m in (nn.Linear(a, b), nn.ReLU())],
                                nn.Linear(dims[-1], classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        if self.pool:
            x = F.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


# ------------------------------------------------------------------- ResNet, ResNeXt
class Basic(nn.Module):
    def __init__(self, i: int, o: int, s: int) -> None:
        super().__init__()
        self.body = nn.Sequential(cbr(i, o, 3, s), cbr(o, o, 3, 1, act=None))
        self.down = cbr(i, o, 1, s, act=None) if s != 1 or i != o else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.down(x))


class Bottleneck(nn.Module):
    def __init__(self, i: int, mid: int, o: int, s: int, g: int = 1) -> None:
        super().__init__()
        self.body = nn.Sequential(cbr(i, mid, 1), cbr(mid, mid, 3, s, g),
                                  cbr(mid, o, 1, act=None))
        self.down = cbr(i, o, 1, s, act=None) if s != 1 or i != o else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.body(x) + self.down(x))


def stem(o: int = 64) -> nn.Sequential:
    return nn.Sequential(cbr(3, o, 7, 2), nn.MaxPool2d(3, 2, 1))


def resnet18() -> nn.Module:
    blocks, i = [], 64
    for k, o in enumerate((64, 128, 256, 512)):
        blocks += [Basic(i, o, 1 if k == 0 else 2), Basic(o, o, 1)]
        i = o
    return Classifier(nn.Sequential(stem(), *blocks), 512)


def resnext26_32x4d() -> nn.Module:
    blocks, i = [], 64
    for k in range(4):
        mid, o = 128 << k, 256 << k
        blocks += [Bottleneck(i, mid, o, 1 if k == 0 else 2, 32), Bottleneck(o, mid, o, 1, 32)]
        i = o
    return Classifier(nn.Sequential(stem(), *blocks), 2048)


# --------------------------------------------------------------- MobileNets, EfficientNet
def mobilenet_v1() -> nn.Module:
    cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 \
        + [(1024, 2), (1024, 1)]
    layers, i = [cbr(3, 32, 3, 2)], 32
    for o, s in cfg:
        layers += [cbr(i, i, 3, s, i), cbr(i, o, 1)]
        i = o
    return Classifier(nn.Sequential(*layers), 1024)


class SE(nn.Module):
    def __init__(self, ch: int, sq: int, act: type[nn.Module], gate: type[nn.Module]) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(ch, sq, 1), act(),
                               nn.Conv2d(sq, ch, 1), gate())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f(x)


class Inverted(nn.Module):
    def __init__(self, i: int, o: int, k: int, s: int, e: int, act: type[nn.Module] = nn.ReLU6,
                 se: Callable[[int, int], nn.Module] | None = None, exp: int | None = None
                 ) -> None:
        super().__init__()
        mid = exp or i * e
        layers: list[nn.Module] = [cbr(i, mid, 1, act=act)] if mid != i else []
        layers.append(cbr(mid, mid, k, s, mid, act=act))
        if se is not None:
            layers.append(se(mid, i))
        layers.append(cbr(mid, o, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.res = s == 1 and i == o

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.res else y


def mobilenet_v2() -> nn.Module:
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
           (6, 160, 3, 2), (6, 320, 1, 1)]
    layers, i = [cbr(3, 32, 3, 2, act=nn.ReLU6)], 32
    for e, o, n, s in cfg:
        for j in range(n):
            layers.append(Inverted(i, o, 3, s if j == 0 else 1, e))
            i = o
    layers.append(cbr(i, 1280, 1, act=nn.ReLU6))
    return Classifier(nn.Sequential(*layers), 1280)


def mobilenet_v3_small() -> nn.Module:
    hs, re = nn.Hardswish, nn.ReLU

    def se(ch: int, _i: int) -> nn.Module:
        return SE(ch, max(8, ch // 4), nn.ReLU, nn.Hardsigmoid)
    cfg = [(3, 16, 16, True, re, 2), (3, 72, 24, False, re, 2), (3, 88, 24, False, re, 1),
           (5, 96, 40, True, hs, 2), (5, 240, 40, True, hs, 1), (5, 240, 40, True, hs, 1),
           (5, 120, 48, True, hs, 1), (5, 144, 48, True, hs, 1), (5, 288, 96, True, hs, 2),
           (5, 576, 96, True, hs, 1), (5, 576, 96, True, hs, 1)]
    layers, i = [cbr(3, 16, 3, 2, act=hs)], 16
    for k, exp, o, use_se, act, s in cfg:
        layers.append(Inverted(i, o, k, s, 1, act, se if use_se else None, exp))
        i = o
    layers.append(cbr(i, 576, 1, act=hs))
    return Classifier(nn.Sequential(*layers), 576, hidden=(1024,))


def efficientnet_b0() -> nn.Module:
    def se(ch: int, i: int) -> nn.Module:
        return SE(ch, max(1, i // 4), nn.SiLU, nn.Sigmoid)
    cfg = [(1, 3, 16, 1, 1), (6, 3, 24, 2, 2), (6, 5, 40, 2, 2), (6, 3, 80, 3, 2),
           (6, 5, 112, 3, 1), (6, 5, 192, 4, 2), (6, 3, 320, 1, 1)]
    layers, i = [cbr(3, 32, 3, 2, act=nn.SiLU)], 32
    for e, k, o, n, s in cfg:
        for j in range(n):
            layers.append(Inverted(i, o, k, s if j == 0 else 1, e, nn.SiLU, se))
            i = o
    layers.append(cbr(i, 1280, 1, act=nn.SiLU))
    return Classifier(nn.Sequential(*layers), 1280)


class MeanPool(nn.Module):
    """Global pooling as a mean over H, W (MnasNet's head: ReduceMean in ONNX)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean([2, 3])


def mnasnet1_0() -> nn.Module:
    cfg = [(3, 24, 3, 2, 3), (5, 40, 3, 2, 3), (5, 80, 3, 2, 6), (3, 96, 3, 1, 6),
           (5, 192, 3, 2, 6), (3, 320, 1, 1, 6)]
    layers, i = [cbr(3, 32, 3, 2), cbr(32, 32, 3, 1, 32), cbr(32, 16, 1, act=None)], 16
    for k, o, n, s, e in cfg:
        for j in range(n):
            layers.append(Inverted(i, o, k, s if j == 0 else 1, e, nn.ReLU))
            i = o
    layers += [cbr(i, 1280, 1), MeanPool()]
    return Classifier(nn.Sequential(*layers), 1280, pool=False)


# ------------------------------------------------------ ShuffleNet, SqueezeNet, GoogLeNet
class Shuffle(nn.Module):
    def __init__(self, i: int, o: int, s: int) -> None:
        super().__init__()
        b = o // 2
        self.s = s
        self.branch1 = nn.Sequential(cbr(i, i, 3, s, i, act=None), cbr(i, b, 1)) \
            if s > 1 else None
        self.branch2 = nn.Sequential(cbr(i if s > 1 else b, b, 1), cbr(b, b, 3, s, b, act=None),
                                     cbr(b, b, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.s == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.branch2(b)), 1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), 1)
        n, c, h, w = out.shape
        return out.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


def shufflenet_v2_x1_0() -> nn.Module:
    layers, i = [stem(24)], 24
    for o, n in ((116, 4), (232, 8), (464, 4)):
        for j in range(n):
            layers.append(Shuffle(i, o, 2 if j == 0 else 1))
            i = o
    layers.append(cbr(i, 1024, 1))
    return Classifier(nn.Sequential(*layers), 1024)


class Fire(nn.Module):
    def __init__(self, i: int, sq: int, e: int) -> None:
        super().__init__()
        self.sq = nn.Sequential(nn.Conv2d(i, sq, 1), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(sq, e, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(sq, e, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.sq(x)
        return torch.cat((self.e1(x), self.e3(x)), 1)


def squeezenet1_1() -> nn.Module:
    pool = nn.MaxPool2d(3, 2, ceil_mode=True)
    f = nn.Sequential(nn.Conv2d(3, 64, 3, 2), nn.ReLU(), pool, Fire(64, 16, 64),
                      Fire(128, 16, 64), pool, Fire(128, 32, 128), Fire(256, 32, 128), pool,
                      Fire(256, 48, 192), Fire(384, 48, 192), Fire(384, 64, 256),
                      Fire(512, 64, 256), nn.Conv2d(512, 1000, 1), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten())

    class Squeeze(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = f

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.f(x)
    return Squeeze()


class Inception(nn.Module):
    def __init__(self, i: int, c1: int, r3: int, c3: int, r5: int, c5: int, pp: int) -> None:
        super().__init__()
        self.b1 = cbr(i, c1, 1)
        self.b2 = nn.Sequential(cbr(i, r3, 1), cbr(r3, c3, 3))
        self.b3 = nn.Sequential(cbr(i, r5, 1), cbr(r5, c5, 3))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), cbr(i, pp, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.b1(x), self.b2(x), self.b3(x), self.b4(x)), 1)


def googlenet() -> nn.Module:
    pool = nn.MaxPool2d(3, 2, ceil_mode=True)
    f = nn.Sequential(cbr(3, 64, 7, 2), pool, cbr(64, 64, 1), cbr(64, 192, 3), pool,
                      Inception(192, 64, 96, 128, 16, 32, 32),
                      Inception(256, 128, 128, 192, 32, 96, 64), pool,
                      Inception(480, 192, 96, 208, 16, 48, 64),
                      Inception(512, 160, 112, 224, 24, 64, 64),
                      Inception(512, 128, 128, 256, 24, 64, 64),
                      Inception(512, 112, 144, 288, 32, 64, 64),
                      Inception(528, 256, 160, 320, 32, 128, 128),
                      nn.MaxPool2d(2, 2, ceil_mode=True),
                      Inception(832, 256, 160, 320, 32, 128, 128),
                      Inception(832, 384, 192, 384, 48, 128, 128))
    return Classifier(f, 1024)


# ------------------------------------------------------------- DenseNet, VGG, AlexNet
class DenseLayer(nn.Module):
    def __init__(self, i: int, growth: int) -> None:
        super().__init__()
        self.f = nn.Sequential(nn.BatchNorm2d(i), nn.ReLU(), nn.Conv2d(i, 4 * growth, 1,
                                                                       bias=False),
                               nn.BatchNorm2d(4 * growth), nn.ReLU(),
                               nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, self.f(x)), 1)


def densenet121() -> nn.Module:
    layers, i, g = [stem(64)], 64, 32
    for k, n in enumerate((6, 12, 24, 16)):
        for _ in range(n):
            layers.append(DenseLayer(i, g))
            i += g
        if k < 3:
            layers += [nn.BatchNorm2d(i), nn.ReLU(), nn.Conv2d(i, i // 2, 1, bias=False),
                       nn.AvgPool2d(2, 2)]
            i //= 2
    layers += [nn.BatchNorm2d(i), nn.ReLU()]
    return Classifier(nn.Sequential(*layers), i)


def vgg11() -> nn.Module:
    layers: list[nn.Module] = []
    i = 3
    for v in (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"):
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(i, v, 3, padding=1), nn.ReLU()]
            i = v
    return Classifier(nn.Sequential(*layers), 25088, hidden=(4096, 4096), pool=False)


def alexnet() -> nn.Module:
    f = nn.Sequential(nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
                      nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
                      nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
    return Classifier(f, 9216, hidden=(4096, 4096), pool=False)


# ------------------------------------------------------------------ RegNet, ConvNeXt
def regnet_x_400mf() -> nn.Module:
    layers, i = [cbr(3, 32, 3, 2)], 32
    for o, n in ((32, 1), (64, 2), (160, 7), (400, 12)):
        for j in range(n):
            layers.append(Bottleneck(i, o, o, 2 if j == 0 else 1, o // 16))
            i = o
    return Classifier(nn.Sequential(*layers), 400)


class ConvNeXtBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.norm = nn.LayerNorm(d)
        self.pw1, self.pw2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ChannelsNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def convnext_nano() -> nn.Module:
    dims, depths = (80, 160, 320, 640), (2, 2, 4, 2)
    layers: list[nn.Module] = [nn.Conv2d(3, dims[0], 4, 4), ChannelsNorm(dims[0])]
    for k, (d, n) in enumerate(zip(dims, depths)):
        if k:
            layers += [ChannelsNorm(dims[k - 1]), nn.Conv2d(dims[k - 1], d, 2, 2)]
        layers += [ConvNeXtBlock(d) for _ in range(n)]
    return Classifier(nn.Sequential(*layers), dims[-1])


# --------------------------------------------------------------------- YOLO-style
class YoloTiny(nn.Module):
    """A YOLO-style detector: LeakyRelu backbone, a Slice-based route, nearest Resize and
    Concat into a second head."""

    def __init__(self, anchors: int = 3, classes: int = 80) -> None:
        super().__init__()
        lk = lambda i, o, k=3, s=1: cbr(i, o, k, s, act=lambda: nn.LeakyReLU(0.1))  # noqa: E731
        self.b1 = nn.Sequential(lk(3, 32, 3, 2), lk(32, 64, 3, 2), lk(64, 128), lk(128, 128, 3, 2),
                                lk(128, 256), lk(256, 256, 3, 2))
        self.b2 = nn.Sequential(lk(256, 512), lk(512, 512, 3, 2), lk(512, 256, 1))
        out = anchors * (5 + classes)
        self.head1 = nn.Sequential(lk(256, 512), nn.Conv2d(512, out, 1))
        self.up = lk(128, 128, 1)
        self.head2 = nn.Sequential(lk(128 + 256, 256), nn.Conv2d(256, out, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = self.b1(x)
        y = self.b2(r)
        route = y[:, :128]  # a Slice
        up = F.interpolate(self.up(route), scale_factor=2, mode="nearest")
        return self.head1(y), self.head2(torch.cat((up, r), 1))


FAMILIES: dict[str, Callable[[], nn.Module]] = {
    "resnet18": resnet18, "resnext26_32x4d": resnext26_32x4d, "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2, "mobilenet_v3_small": mobilenet_v3_small,
    "efficientnet_b0": efficientnet_b0, "mnasnet1_0": mnasnet1_0,
    "shufflenet_v2_x1_0": shufflenet_v2_x1_0, "squeezenet1_1": squeezenet1_1,
    "googlenet": googlenet, "densenet121": densenet121, "vgg11": vgg11, "alexnet": alexnet,
    "regnet_x_400mf": regnet_x_400mf, "convnext_nano": convnext_nano, "yolo_tiny": YoloTiny,
}


def settle_batchnorm(model: nn.Module, shape: tuple[int, ...], batches: int = 4,
                     seed: int = 0) -> nn.Module:
    """Re-estimate every BatchNorm's statistics on random inputs (a cumulative average), then
    switch to inference mode."""
    torch.manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(8, *shape[1:]))
    return model.eval()


def build(name: str, seed: int = 0, size: int = 224) -> nn.Module:
    torch.manual_seed(seed)
    return settle_batchnorm(FAMILIES[name](), (1, 3, size, size), seed=seed)
