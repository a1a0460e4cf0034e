"""The packed VTA operators as users call them: the templates of :mod:`.vta` with the knobs
left out defaulted by :mod:`.defaults` (the best of the space as ranked by vta.sim.perf).

The templates sit below the default-knob search (which builds and times them); these entry
points sit above both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vta.isa import Config

from ..errors import ScheduleError
from .defaults import conv2d_default, dense_default
from .vta import Epilogue, Operator, conv2d_operator, dense_operator, pads4


def conv2d_knobs(data_shape: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int] = (1, 1), padding: Sequence[int] = (0, 0),
                 cfg: Config | None = None, *, virtual_threads: bool = True,
                 dilation: Sequence[int] = (1, 1), groups: int = 1,
                 epilogue: Epilogue | None = None) -> dict[str, int]:
    """The default knobs: the best of the template's space as ranked by vta.sim.perf
    (:func:`vta.compiler.topi.defaults.conv2d_default`); ``virtual_threads=False`` keeps
    to one thread. ``data_shape``/``kernel_shape`` in tiles (packed or their first four)."""
    if cfg is None:
        raise ScheduleError("conv2d_knobs needs the VTA configuration (cfg=)")
    return conv2d_default(tuple(data_shape[:4]), tuple(kernel_shape[:4]), tuple(strides),
                          pads4(padding), tuple(dilation), groups, cfg,
                          epilogue or Epilogue(bias=True, shift=8, clip=(-128, 127)),
                          threads=virtual_threads).knobs


def dense_knobs(n: int, k: int, m: int, cfg: Config, epilogue: Epilogue | None = None
                ) -> dict[str, int]:
    """The default dense knobs: the best of the space as ranked by vta.sim.perf (cached)."""
    return dense_default(n, k, m, cfg, epilogue or Epilogue(bias=True, shift=8,
                                                            clip=(-128, 127))).knobs


def conv2d_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], *,
                  config: Config, strides: Sequence[int] = (1, 1),
                  padding: Sequence[int] = (0, 0), dilation: Sequence[int] = (1, 1),
                  knobs: dict[str, int] | None = None, groups: int = 1, **kw: Any
                  ) -> Operator:
    """Packed int8 conv2d (:func:`vta.compiler.topi.vta.conv2d_operator`, whose keywords
    ``kw`` takes: epilogue, ``target``); ``knobs=None`` takes the default knobs
    (:func:`conv2d_knobs`: ranked by vta.sim.perf, cached)."""
    def default(epi: Epilogue) -> dict[str, int]:
        return conv2d_knobs(data_shape, kernel_shape, strides, padding, config,
                            dilation=dilation, groups=groups, epilogue=epi)

    return conv2d_operator(data_shape, kernel_shape, config=config, strides=strides,
                           padding=padding, dilation=dilation, groups=groups,
                           knobs=knobs or default, **kw)


def group_conv2d_packed(data_shape: Sequence[int], kernel_shape: Sequence[int], groups: int,
                        **kw: Any) -> Operator:
    """Packed group convolution: ``groups`` groups of whole channel tiles; the kernel is
    (CO/BLOCK_OUT, CI/BLOCK_IN/groups, KH, KW, BLOCK_OUT, BLOCK_IN). Depthwise convolutions run
    as TVM VTA ran MobileNet: one group per channel tile with block-diagonal weight tiles
    (:func:`vta.compiler.topi.pack.depthwise_to_group_kernel`)."""
    return conv2d_packed(data_shape, kernel_shape, groups=groups, **kw)


def dense_packed(data_shape: Sequence[int], weight_shape: Sequence[int], *, config: Config,
                 knobs: dict[str, int] | None = None, **kw: Any) -> Operator:
    """Packed int8 dense (:func:`vta.compiler.topi.vta.dense_operator`, whose keywords ``kw``
    takes: epilogue, ``target``); ``knobs=None`` takes the default knobs (:func:`dense_knobs`,
    ranked by vta.sim.perf, cached)."""
    n, k = data_shape[:2]
    m = weight_shape[0]

    def default(epi: Epilogue) -> dict[str, int]:
        return dense_knobs(n, k, m, config, epi)

    return dense_operator(data_shape, weight_shape, config=config, knobs=knobs or default, **kw)


__all__ = ["conv2d_knobs", "dense_knobs", "conv2d_packed", "group_conv2d_packed",
           "dense_packed"]
