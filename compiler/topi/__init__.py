"""vta.compiler.topi: operators with computes, default schedules and tunable knobs.

VTA (packed int8, fsim/tsim/...): :func:`conv2d_packed`, :func:`group_conv2d_packed`,
:func:`conv2d_transpose_packed`, :func:`dense_packed`, :func:`elementwise_packed`.
CPU (LLVM, float): :mod:`vta.compiler.topi.cpu`. Layout helpers: :mod:`vta.compiler.topi.pack`.
"""

from . import cpu, defaults, nn, pack
from .conv_transpose import (
    conv2d_transpose_packed,
    conv2d_transpose_reference,
    packed_phase_kernel,
)
from .operators import (
    conv2d_knobs,
    conv2d_packed,
    dense_knobs,
    dense_packed,
    group_conv2d_packed,
)
from .pack import (
    depthwise_to_group_kernel,
    pack_bias,
    pack_matrix,
    pack_nchw,
    pack_oihw,
    unpack_matrix,
    unpack_nchw,
)
from .vta import (
    KNOB_NAMES,
    MAX_VIRTUAL_THREADS,
    Epilogue,
    Operator,
    conv2d_acc_reference,
    conv2d_fits,
    conv2d_knob_space,
    conv2d_out_hw,
    conv2d_packed_compute,
    conv2d_packed_schedule,
    conv2d_reference,
    conv2d_valid,
    dense_knob_space,
    dense_reference,
    dense_valid,
    elementwise_packed,
    pads4,
)

__all__ = [
    "cpu", "nn", "pack", "pack_nchw", "unpack_nchw", "pack_oihw", "pack_bias",
    "depthwise_to_group_kernel", "pack_matrix", "unpack_matrix", "KNOB_NAMES", "Epilogue",
    "Operator", "conv2d_packed", "conv2d_packed_compute",
    "conv2d_packed_schedule", "conv2d_knobs", "conv2d_knob_space", "conv2d_fits",
    "conv2d_reference", "conv2d_acc_reference", "group_conv2d_packed",
    "conv2d_transpose_packed", "conv2d_transpose_reference", "packed_phase_kernel",
    "dense_packed", "dense_knobs",
    "dense_reference", "defaults", "MAX_VIRTUAL_THREADS", "conv2d_out_hw", "conv2d_valid",
    "dense_knob_space", "dense_valid", "pads4",
    "elementwise_packed",
]
