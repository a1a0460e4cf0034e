"""CPU code generation: loop IR -> LLVM IR (llvmlite) -> native code, called on numpy arrays.

Every buffer is a flat pointer argument (``noalias``); loops become counted LLVM loops whose
innermost bodies the LLVM loop vectoriser turns into SIMD code (the optimisation pipeline is
``create_pass_builder(tm, create_pipeline_tuning_options(speed_level=3))``, i.e. -O3 with loop and
SLP vectorisation). Loops a schedule marks ``vectorize`` carry ``llvm.loop.vectorize.enable``
metadata; ``unroll`` loops are unrolled here. Selects whose branches read memory are lowered with
a clamped (always in-bounds) index so padding never reads outside an array.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CodegenError
from ..lower import lower
from ..schedule import Schedule
from ..te.tensor import PlaceholderOp, Tensor
from ..tir.expr import (
    Binary,
    BufferLoad,
    Call,
    Cast,
    Const,
    Expr,
    Select,
    Var,
    is_float,
    walk,
)
from ..tir.stmt import (
    Allocate,
    Attr,
    Buffer,
    For,
    If,
    Nop,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)

_LL = None
#: Fast-math flags on float arithmetic: reassociation lets LLVM vectorise reductions and
#: contract multiply-adds into FMA (results match numpy to float rounding, not bit-exactly).
_FAST = ("reassoc", "contract", "nsz")


def _llvm():
    global _LL
    if _LL is None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _LL = llvm
    return _LL


def _ir():
    from llvmlite import ir

    return ir


def _type(dtype: str):
    ir = _ir()
    return {"int8": ir.IntType(8), "uint8": ir.IntType(8), "int16": ir.IntType(16),
            "uint16": ir.IntType(16), "int32": ir.IntType(32), "uint32": ir.IntType(32),
            "int64": ir.IntType(64), "bool": ir.IntType(1), "float32": ir.FloatType(),
            "float64": ir.DoubleType()}[dtype]


class _Gen:
    def __init__(self, func: PrimFunc, nontemporal: bool = False):
        ir = _ir()
        self.func = func
        self.module = ir.Module(name=func.name)
        llvm = _llvm()
        self.module.triple = llvm.get_process_triple()
        ptr = ir.PointerType()
        self.fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [ptr] * len(
            func.params)), name=func.name)
        for a in self.fn.args:
            a.add_attribute("noalias")
        self.bufs: dict[Buffer, Any] = dict(zip(func.params, self.fn.args))
        self.vars: dict[Var, Any] = {}
        entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)
        self.mallocs: list[Any] = []
        self._malloc = None
        self._free = None
        self._counter = 0
        self.nontemporal = nontemporal

    def run(self) -> str:
        ir = _ir()
        from ..tir.stmt import walk as swalk

        for n in swalk(self.func.body):  # every buffer is allocated once, at entry
            if isinstance(n, Allocate) and n.buffer not in self.bufs:
                nbytes = max(n.buffer.size * np.dtype(n.buffer.dtype).itemsize, 1)
                if nbytes <= (256 << 10):
                    p = self.b.alloca(_type(n.buffer.dtype), size=n.buffer.size,
                                      name=n.buffer.name)
                    p.align = 64
                else:
                    p = self.b.call(self.malloc_fn(), [ir.Constant(ir.IntType(64), nbytes)])
                    self.mallocs.append(p)
                self.bufs[n.buffer] = p
        self.stmt(self.func.body)
        for p in self.mallocs:
            self.b.call(self.free_fn(), [p])
        self.b.ret_void()
        return str(self.module)

    def malloc_fn(self):
        ir = _ir()
        if self._malloc is None:
            self._malloc = ir.Function(self.module, ir.FunctionType(ir.PointerType(),
                                                                    [ir.IntType(64)]), "malloc")
        return self._malloc

    def free_fn(self):
        ir = _ir()
        if self._free is None:
            self._free = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                                  [ir.PointerType()]), "free")
        return self._free

    # ---------------------------------------------------------------- statements
    def stmt(self, s: Stmt) -> None:
        ir = _ir()
        if isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, Nop):
            pass
        elif isinstance(s, (Attr, Allocate)):
            self.stmt(s.body)
        elif isinstance(s, For):
            if s.kind == "unroll" and s.extent <= 64:
                for i in range(s.extent):
                    self.vars[s.var] = ir.Constant(ir.IntType(32), i)
                    self.stmt(s.body)
                del self.vars[s.var]
            else:
                self.loop(s)
        elif isinstance(s, If):
            cond = self.expr(s.cond)
            if s.else_ is None:
                with self.b.if_then(cond):
                    self.stmt(s.then)
            else:
                with self.b.if_else(cond) as (then, other):
                    with then:
                        self.stmt(s.then)
                    with other:
                        self.stmt(s.else_)
        elif isinstance(s, Store):
            val = self.expr(s.value)
            st = self.b.store(val, self.addr(s.buffer, s.indices))
            if self.nontemporal and s.buffer in self.func.params:
                one = self.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
                st.set_metadata("nontemporal", one)
        else:
            raise CodegenError(f"{type(s).__name__} cannot run on the CPU (VTA-only statement)")

    def loop(self, s: For) -> None:
        ir = _ir()
        i32 = ir.IntType(32)
        self._counter += 1
        pre = self.b.block
        head = self.fn.append_basic_block(f"for_{s.var.name}_{self._counter}")
        body = self.fn.append_basic_block(f"body_{s.var.name}_{self._counter}")
        done = self.fn.append_basic_block(f"end_{s.var.name}_{self._counter}")
        self.b.branch(head)
        self.b.position_at_end(head)
        phi = self.b.phi(i32, name=s.var.name)
        phi.add_incoming(ir.Constant(i32, 0), pre)
        cond = self.b.icmp_signed("<", phi, ir.Constant(i32, s.extent))
        self.b.cbranch(cond, body, done)
        self.b.position_at_end(body)
        self.vars[s.var] = phi
        self.stmt(s.body)
        nxt = self.b.add(phi, ir.Constant(i32, 1), flags=["nsw"])
        latch = self.b.branch(head)
        if s.kind == "vectorize":
            md = self.module.add_metadata
            enable = md([ir.MetaDataString(self.module, "llvm.loop.vectorize.enable"),
                         ir.Constant(ir.IntType(1), 1)])
            loop_md = self.module.add_metadata([enable])
            latch.set_metadata("llvm.loop", loop_md)
        phi.add_incoming(nxt, self.b.block)
        self.b.position_at_end(done)
        del self.vars[s.var]

    def addr(self, buf: Buffer, indices: Sequence[Expr], safe: bool = False):
        ir = _ir()
        i64 = ir.IntType(64)
        flat = None
        for idx, stride in zip(indices, buf.strides()):
            v = self.b.sext(self.expr(idx), i64) if self.expr_type(idx) != 64 else self.expr(idx)
            term = v if stride == 1 else self.b.mul(v, ir.Constant(i64, stride), flags=["nsw"])
            flat = term if flat is None else self.b.add(flat, term, flags=["nsw"])
        if flat is None:
            flat = ir.Constant(i64, 0)
        if safe:
            zero, top = ir.Constant(i64, 0), ir.Constant(i64, buf.size - 1)
            flat = self.b.select(self.b.icmp_signed("<", flat, zero), zero, flat)
            flat = self.b.select(self.b.icmp_signed(">", flat, top), top, flat)
        return self.b.gep(self.bufs[buf], [flat], inbounds=True, source_etype=_type(buf.dtype))

    @staticmethod
    def expr_type(e: Expr) -> int:
        return 64 if e.dtype == "int64" else 32

    # ---------------------------------------------------------------- expressions
    def expr(self, e: Expr, safe: bool = False):
        ir = _ir()
        b = self.b
        if isinstance(e, Const):
            return ir.Constant(_type(e.dtype), e.value)
        if isinstance(e, Var):
            if e not in self.vars:
                raise CodegenError(f"variable {e.name} is not bound")
            return self.vars[e]
        if isinstance(e, BufferLoad):
            if e.buffer not in self.bufs:
                raise CodegenError(f"buffer {e.buffer.name} is not allocated")
            return b.load(self.addr(e.buffer, e.indices, safe), typ=_type(e.dtype))
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value, safe), e.value.dtype, e.dtype)
        if isinstance(e, Select):
            has_load = any(isinstance(n, BufferLoad) for n in walk(e.t)) or any(
                isinstance(n, BufferLoad) for n in walk(e.f))
            c = self.expr(e.cond, safe)
            t = self.expr(e.t, safe or has_load)
            f = self.expr(e.f, safe or has_load)
            return b.select(c, t, f)
        if isinstance(e, Call):
            args = [self.expr(a, safe) for a in e.args]
            if e.name in ("exp", "sqrt", "log", "fabs", "floor"):
                fn = self.module.declare_intrinsic(f"llvm.{e.name}", [_type(e.dtype)])
                return b.call(fn, args)
            if e.name == "reinterpret":  # same-width bit cast (int32 <-> float32)
                return b.bitcast(args[0], _type(e.dtype))
            raise CodegenError(f"unknown call {e.name}")
        if isinstance(e, Binary):
            return self.binary(e, safe)
        raise CodegenError(f"cannot generate code for {type(e).__name__}")

    def cast(self, v, src: str, dst: str):
        ir = _ir()
        b = self.b
        if src == dst:
            return v
        st, dt = _type(src), _type(dst)
        if is_float(src) and is_float(dst):
            return b.fpext(v, dt) if isinstance(dt, ir.DoubleType) else b.fptrunc(v, dt)
        if is_float(src):
            return b.fptosi(v, dt)
        if is_float(dst):
            return b.uitofp(v, dt) if src.startswith("uint") or src == "bool" else \
                b.sitofp(v, dt)
        if st.width == dt.width:
            return v
        if st.width > dt.width:
            return b.trunc(v, dt)
        return b.zext(v, dt) if src.startswith("uint") or src == "bool" else b.sext(v, dt)

    def binary(self, e: Binary, safe: bool):
        ir = _ir()
        b = self.b
        x, y = self.expr(e.a, safe), self.expr(e.b, safe)
        dt = e.a.dtype
        if e.a.dtype != e.b.dtype and e.op not in ("shl", "shr"):
            x = self.cast(x, e.a.dtype, e.dtype if e.dtype != "bool" else e.a.dtype)
            y = self.cast(y, e.b.dtype, e.dtype if e.dtype != "bool" else e.a.dtype)
            dt = e.dtype if e.dtype != "bool" else e.a.dtype
        fl = is_float(dt)
        op = e.op
        if op in ("and", "or"):
            return b.and_(x, y) if op == "and" else b.or_(x, y)
        if op in ("lt", "le", "eq", "ne"):
            sym = {"lt": "<", "le": "<=", "eq": "==", "ne": "!="}[op]
            return b.fcmp_ordered(sym, x, y) if fl else b.icmp_signed(sym, x, y)
        if fl:
            if op == "add":
                return b.fadd(x, y, flags=_FAST)
            if op == "sub":
                return b.fsub(x, y, flags=_FAST)
            if op == "mul":
                return b.fmul(x, y, flags=_FAST)
            if op == "div":
                return b.fdiv(x, y, flags=_FAST)
            if op == "min":
                return b.select(b.fcmp_ordered("<", x, y), x, y)
            if op == "max":
                return b.select(b.fcmp_ordered(">", x, y), x, y)
        else:
            if op == "add":
                return b.add(x, y)
            if op == "sub":
                return b.sub(x, y)
            if op == "mul":
                return b.mul(x, y)
            if op == "min":
                return b.select(b.icmp_signed("<", x, y), x, y)
            if op == "max":
                return b.select(b.icmp_signed(">", x, y), x, y)
            if op == "shl":
                return b.shl(x, self.cast(y, e.b.dtype, dt))
            if op == "shr":
                return b.ashr(x, self.cast(y, e.b.dtype, dt))
            if op in ("floordiv", "floormod", "div"):
                q = b.sdiv(x, y)
                r = b.srem(x, y)
                if op == "div":
                    return q
                zero = ir.Constant(x.type, 0)
                adjust = b.and_(b.icmp_signed("!=", r, zero),
                                b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                              b.icmp_signed("<", y, zero)))
                if op == "floordiv":
                    return b.select(adjust, b.sub(q, ir.Constant(x.type, 1)), q)
                return b.select(adjust, b.add(r, y), r)
        raise CodegenError(f"operator {op} on {dt} is not supported on the CPU")


def llvm_ir(func: PrimFunc, nontemporal: bool = False) -> str:
    """The LLVM IR text of a lowered function (``nontemporal``: streaming output stores)."""
    return _Gen(func, nontemporal).run()


class CpuModule:
    """A JIT-compiled CPU function; call it on numpy arrays (outputs written in place)."""

    def __init__(self, func: PrimFunc, args: Sequence[Tensor], opt_level: int = 3,
                 prefer_256_bit: bool = True, unroll: bool = True,
                 nontemporal_stores: bool = False):
        llvm = _llvm()
        self.func = func
        self.args = list(args)
        self.llvm_ir = llvm_ir(func, nontemporal_stores)
        mod = llvm.parse_assembly(self.llvm_ir)
        mod.verify()
        target = llvm.Target.from_default_triple()
        features = llvm.get_host_cpu_features().flatten()
        if prefer_256_bit and "+avx512f" in features:
            # 512-bit vectors lower the clock of many x86 cores; LLVM's own default for -O3
            features += ",+prefer-256-bit"
        self.tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=features,
                                               opt=3, codemodel="jitdefault")
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = unroll
        pb = llvm.create_pass_builder(self.tm, pto)
        mpm = pb.getModulePassManager()
        mpm.run(mod, pb)
        self.optimized_ir = str(mod)
        self.engine = llvm.create_mcjit_compiler(mod, self.tm)
        self.engine.finalize_object()
        addr = self.engine.get_function_address(func.name)
        self._cfn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(func.params))(addr)
        self.outputs = [k for k, a in enumerate(args) if not isinstance(a.op, PlaceholderOp)]

    @property
    def ir(self) -> str:
        return str(self.func)

    def __call__(self, *arrays: np.ndarray) -> None:
        if len(arrays) != len(self.func.params):
            raise CodegenError(f"{self.func.name} takes {len(self.func.params)} arrays, got "
                               f"{len(arrays)}")
        ptrs = []
        for a, p in zip(arrays, self.func.params):
            if not isinstance(a, np.ndarray) or tuple(a.shape) != p.shape or \
                    a.dtype != np.dtype(p.dtype) or not a.flags.c_contiguous:
                raise CodegenError(f"argument {p.name}: expected a C-contiguous "
                                   f"{p.dtype}{list(p.shape)} array, got "
                                   f"{getattr(a, 'dtype', type(a))}{list(getattr(a, 'shape', []))}")
            ptrs.append(a.ctypes.data)
        self._cfn(*ptrs)


def build_cpu(sch: Schedule, args: Sequence[Tensor], name: str = "main", **kw: Any) -> CpuModule:
    return CpuModule(lower(sch, args, name), args, **kw)


__all__ = ["CpuModule", "build_cpu", "llvm_ir"]
