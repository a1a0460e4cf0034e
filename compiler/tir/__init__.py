"""vta.compiler.tir: the loop IR (expressions, statements), its printer and verifier."""

from .expr import *  # noqa: F403
from .expr import Expr, Var, const, simplify  # noqa: F401
from .printer import expr_str, func_str, stmt_str
from .stmt import *  # noqa: F403
from .verify import verify

__all__ = ["expr_str", "func_str", "stmt_str", "verify"]
