"""The VTA compilation environment for one configuration (TVM's ``vta.get_env()``, but explicit).

>>> from vta.isa import Config
>>> env = Env(Config())
>>> env.BATCH, env.BLOCK_IN, env.inp_dtype, env.acc_scope
(1, 16, 'int8', 'local.acc_buffer')
"""

from __future__ import annotations

from functools import cached_property

from vta.isa import Config

from .te import tensor as te
from .tir.stmt import ACC_SCOPE, INP_SCOPE, WGT_SCOPE, Gemm, seq


class Env:
    """Sizes, dtypes, scopes, pragma names and the GEMM intrinsic of a configuration."""

    inp_scope = INP_SCOPE
    wgt_scope = WGT_SCOPE
    acc_scope = ACC_SCOPE
    dma_copy = "dma_copy"
    alu = "alu"

    def __init__(self, cfg: Config):
        self.cfg = cfg

    @property
    def BATCH(self) -> int:  # noqa: N802 - TVM spelling
        return self.cfg.batch

    @property
    def BLOCK_IN(self) -> int:  # noqa: N802
        return self.cfg.block_in

    @property
    def BLOCK_OUT(self) -> int:  # noqa: N802
        return self.cfg.block_out

    @property
    def inp_dtype(self) -> str:
        return f"int{self.cfg.inp_width}"

    @property
    def wgt_dtype(self) -> str:
        return f"int{self.cfg.wgt_width}"

    @property
    def acc_dtype(self) -> str:
        return f"int{self.cfg.acc_width}"

    @property
    def out_dtype(self) -> str:
        return f"int{self.cfg.out_width}"

    @cached_property
    def gemm(self) -> te.TensorIntrin:
        """The GEMM intrinsic, declared as a tensor expression plus its lowering rule."""
        return gemm_intrin(self.cfg)

    def __repr__(self) -> str:
        return f"Env({self.BATCH}x{self.BLOCK_IN}x{self.BLOCK_OUT})"


def gemm_intrin(cfg: Config) -> te.TensorIntrin:
    """out[BATCH, BLOCK_OUT] += inp[BATCH, BLOCK_IN] . wgt[BLOCK_OUT, BLOCK_IN]^T (int32)."""
    env = Env(cfg)
    a = te.placeholder((env.BATCH, env.BLOCK_IN), dtype=env.inp_dtype, name="inp")
    b = te.placeholder((env.BLOCK_OUT, env.BLOCK_IN), dtype=env.wgt_dtype, name="wgt")
    k = te.reduce_axis((0, env.BLOCK_IN), name="k")
    out = te.compute(
        (env.BATCH, env.BLOCK_OUT),
        lambda i, j: te.sum(a[i, k].astype(env.acc_dtype) * b[j, k].astype(env.acc_dtype),
                            axis=[k]),
        name="out")

    def lower(ins, outs):
        inp, wgt = ins
        dst = outs[0]

        def update():
            return Gemm(False, dst.buffer, dst.tile_offset(), inp.buffer, inp.tile_offset(),
                        wgt.buffer, wgt.tile_offset())

        reset = Gemm(True, dst.buffer, dst.tile_offset())
        return seq([reset, update()]), reset, update()

    name = (f"vta.gemm.{env.BATCH}x{env.BLOCK_IN}x{env.BLOCK_OUT}.{env.inp_dtype}."
            f"{env.wgt_dtype}.{env.acc_dtype}")
    return te.decl_tensor_intrin(out.op, lower, name=name)


__all__ = ["Env", "gemm_intrin"]
