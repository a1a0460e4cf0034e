"""vta.compiler.tir: the loop IR (expressions, statements), their text form and verifier."""

from .expr import *  # noqa: F403
from .expr import Expr, Var, const, expr_str, simplify  # noqa: F401
from .stmt import *  # noqa: F403
from .stmt import func_str, stmt_str
from .verify import verify

__all__ = ["expr_str", "func_str", "stmt_str", "verify"]
