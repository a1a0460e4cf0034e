"""vta.compiler.te: tensor expressions with TVM's spelling (``from vta.compiler import te``)."""

from ..schedule import create_schedule
from ..tir.expr import Var, cast, const, select
from .tensor import (
    ComputeOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Tensor,
    TensorIntrin,
    all,
    clip,
    compute,
    decl_tensor_intrin,
    exp,
    get_intrin,
    if_then_else,
    max,
    min,
    placeholder,
    reduce_axis,
    sqrt,
    sum,
    thread_axis,
    var,
)

__all__ = [
    "placeholder", "compute", "reduce_axis", "sum", "max", "min", "thread_axis",
    "create_schedule", "decl_tensor_intrin", "get_intrin", "clip", "if_then_else", "select",
    "exp", "sqrt", "all", "var", "const", "cast", "Var", "Tensor", "IterVar", "Operation",
    "ComputeOp", "PlaceholderOp", "TensorIntrin",
]
