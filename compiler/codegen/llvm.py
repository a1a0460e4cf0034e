"""CPU code generation: loop IR -> LLVM IR (llvmlite) -> native code, called on numpy arrays.

Every buffer is a flat pointer argument (``noalias``); loops become counted LLVM loops whose
innermost bodies the LLVM loop vectoriser turns into SIMD code (the optimisation pipeline is
``create_pass_builder(tm, create_pipeline_tuning_options(speed_level=3))``, i.e. -O3 with loop and
SLP vectorisation). Loops a schedule marks ``vectorize`` carry ``llvm.loop.vectorize.enable``
metadata; ``unroll`` loops are unrolled here. Selects whose branches read memory are lowered with
a clamped (always in-bounds) index so padding never reads outside an array.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import re
from collections.abc import Sequence
from math import prod
from pathlib import Path
from typing import Any

import numpy as np
from vta.isa.errors import FileError
from vta.isa.fileio import read_bytes, write_atomic

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
from ..tir.stmt import walk as swalk

_LL = None
#: Fast-math flags on float arithmetic: reassociation lets LLVM vectorise reductions and
#: contract multiply-adds into FMA (results match numpy to float rounding, not bit-exactly).
_FAST = ("reassoc", "contract", "nsz")


def _llvm():
    global _LL
    if _LL is None:
        import llvmlite.binding as llvm  # deferred: llvmlite

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _LL = llvm
    return _LL


def _ir():
    from llvmlite import ir  # deferred: llvmlite

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
            if e.name in ("exp", "sqrt", "log", "fabs", "floor", "rint"):
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


#: Field offsets in a numpy array object (``PyArrayObject_fields`` after PyObject_HEAD: data,
#: nd, dimensions, strides, base, descr, flags); verified on a sample array before use.
_OFF = {"type": 8, "data": 16, "nd": 24, "dims": 32, "descr": 56, "flags": 64}
_C_CONTIGUOUS, _WRITEABLE = 0x1, 0x400


def _array_layout_ok() -> bool:
    """Whether this numpy's array objects have the field offsets of :data:`_OFF`."""
    a = np.zeros((2, 3), dtype=np.float32)

    def word(off: int, ty: Any = ctypes.c_void_p) -> Any:
        return ty.from_address(id(a) + off).value

    try:
        dims = ctypes.cast(word(_OFF["dims"]), ctypes.POINTER(ctypes.c_int64))
        return (word(_OFF["type"]) == id(np.ndarray) and word(_OFF["data"]) == a.ctypes.data
                and word(_OFF["nd"], ctypes.c_int32) == 2 and (dims[0], dims[1]) == (2, 3)
                and word(_OFF["descr"]) == id(a.dtype)
                and word(_OFF["flags"], ctypes.c_int32) & (_C_CONTIGUOUS | _WRITEABLE)
                == (_C_CONTIGUOUS | _WRITEABLE))
    except (ValueError, OverflowError):  # pragma: no cover - exotic platforms
        return False


def _array_wrapper(name: str, params: Sequence[Buffer], outputs: Sequence[int],
                   flat: bool) -> str:
    """LLVM IR of ``<name>__arrays`` (or ``__flat``): takes the numpy array objects, checks
    each is an exact ndarray, C-contiguous (outputs writable), of the parameter's dtype and
    shape (``flat``: element count), and calls ``name`` with their data pointers. Returns 0,
    or 1 without running when an argument needs the Python path (converted or rejected)."""
    ir: list[str] = []
    fn = f"{name}__{'flat' if flat else 'arrays'}"
    args = ", ".join(f"ptr %o{k}" for k in range(len(params)))
    ir += [f'define i32 @"{fn}"({args}) {{', "entry:"]
    nblk = [0]

    def check(cond: str) -> None:
        nblk[0] += 1
        ir.append(f"  br i1 {cond}, label %ok{nblk[0]}, label %fail")
        ir.append(f"ok{nblk[0]}:")

    def field(k: int, f: str, ty: str, tag: str) -> str:
        ir.append(f"  %{tag}p{k} = getelementptr i8, ptr %o{k}, i64 {_OFF[f]}")
        ir.append(f"  %{tag}{k} = load {ty}, ptr %{tag}p{k}, align 8")
        return f"%{tag}{k}"

    for k, p in enumerate(params):
        tp = field(k, "type", "ptr", "tp")
        ir.append(f"  %tpi{k} = ptrtoint ptr {tp} to i64")
        ir.append(f"  %tpw{k} = load i64, ptr @__vta_ndarray, align 8")
        ir.append(f"  %tpc{k} = icmp eq i64 %tpi{k}, %tpw{k}")
        check(f"%tpc{k}")
        ds = field(k, "descr", "ptr", "ds")
        ir.append(f"  %dsi{k} = ptrtoint ptr {ds} to i64")
        ir.append(f"  %dsw{k} = load i64, ptr @__vta_dtype_{k}, align 8")
        ir.append(f"  %dsc{k} = icmp eq i64 %dsi{k}, %dsw{k}")
        check(f"%dsc{k}")
        fl = field(k, "flags", "i32", "fl")
        req = _C_CONTIGUOUS | (_WRITEABLE if k in outputs else 0)
        ir.append(f"  %flm{k} = and i32 {fl}, {req}")
        ir.append(f"  %flc{k} = icmp eq i32 %flm{k}, {req}")
        check(f"%flc{k}")
        nd = field(k, "nd", "i32", "nd")
        dims = field(k, "dims", "ptr", "dm")
        if flat:  # product of the dimensions == element count
            ir.append(f"  br label %lp{k}")
            ir.append(f"lp{k}:")
            prev = "ok" + str(nblk[0])
            ir.append(f"  %i{k} = phi i32 [0, %{prev}], [%in{k}, %lb{k}]")
            ir.append(f"  %pr{k} = phi i64 [1, %{prev}], [%pn{k}, %lb{k}]")
            ir.append(f"  %lc{k} = icmp slt i32 %i{k}, {nd}")
            ir.append(f"  br i1 %lc{k}, label %lb{k}, label %le{k}")
            ir.append(f"lb{k}:")
            ir.append(f"  %ix{k} = sext i32 %i{k} to i64")
            ir.append(f"  %dp{k} = getelementptr i64, ptr {dims}, i64 %ix{k}")
            ir.append(f"  %dv{k} = load i64, ptr %dp{k}, align 8")
            ir.append(f"  %pn{k} = mul i64 %pr{k}, %dv{k}")
            ir.append(f"  %in{k} = add i32 %i{k}, 1")
            ir.append(f"  br label %lp{k}")
            ir.append(f"le{k}:")
            ir.append(f"  %szc{k} = icmp eq i64 %pr{k}, {prod(p.shape)}")
            check(f"%szc{k}")
        else:
            ir.append(f"  %ndc{k} = icmp eq i32 {nd}, {len(p.shape)}")
            check(f"%ndc{k}")
            for d, ext in enumerate(p.shape):
                ir.append(f"  %d{k}_{d}p = getelementptr i64, ptr {dims}, i64 {d}")
                ir.append(f"  %d{k}_{d} = load i64, ptr %d{k}_{d}p, align 8")
                ir.append(f"  %d{k}_{d}c = icmp eq i64 %d{k}_{d}, {ext}")
                check(f"%d{k}_{d}c")
    ptrs = [field(k, "data", "ptr", "da") for k in range(len(params))]
    ir.append(f'  call void @"{name}"(' + ", ".join(f"ptr {x}" for x in ptrs) + ")")
    ir += ["  ret i32 0", "fail:", "  ret i32 1", "}", ""]
    return "\n".join(ir)


def _wrapper_globals(params: Sequence[Buffer]) -> str:
    """The globals the wrappers compare against: the addresses of numpy's ndarray type and of
    each parameter's dtype, written after loading (so the machine code holds no address of
    this process and can be cached)."""
    return "".join(["@__vta_ndarray = global i64 0\n",
                    *(f"@__vta_dtype_{k} = global i64 0\n" for k in range(len(params)))])


def _set_wrapper_globals(engine: Any, params: Sequence[Buffer]) -> None:
    ctypes.c_int64.from_address(engine.get_global_value_address("__vta_ndarray")).value = \
        id(np.ndarray)
    for k, p in enumerate(params):
        ctypes.c_int64.from_address(engine.get_global_value_address(f"__vta_dtype_{k}")).value \
            = id(np.dtype(p.dtype))


def _mark_nontemporal(ir: str, name: str) -> str:
    """Mark the vector stores of function ``name`` non-temporal (streaming: the written lines
    bypass the caches and are not read first). The backend splits under-aligned ones into
    narrower non-temporal stores."""
    head = re.search(rf'define [^\n]*@"?{re.escape(name)}"?\(', ir)
    if head is None:
        return ir
    end = ir.find("\n}\n", head.start())
    node = 1 + max((int(m) for m in re.findall(r"^!(\d+) =", ir, re.M)), default=0)
    body = re.sub(r"(store <\d+ x \w+> [^\n]*?, align \d+)(?=\n|,)",
                  rf"\1, !nontemporal !{node}", ir[head.start():end])
    return ir[:head.start()] + body + ir[end:] + f"\n!{node} = !{{i32 1}}\n"


def _store(path: Path, obj: bytes) -> None:
    """Keep a compiled object followed by its sha256 (atomically; a cache that cannot be
    written is skipped)."""
    with contextlib.suppress(OSError, FileError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, obj + hashlib.sha256(obj).digest(), "compiled host kernel")


def _load(path: Path) -> bytes | None:
    """The object :func:`_store` kept at ``path``, or None when there is none or it is
    damaged (truncated, overwritten: its sha256 does not hold), so that it is rebuilt; the
    JIT never loads a damaged object."""
    try:
        data = read_bytes(path, "compiled host kernel")
    except FileError:
        return None
    obj, digest = data[:-32], data[-32:]
    return obj if obj and hashlib.sha256(obj).digest() == digest else None


class CpuModule:
    """A JIT-compiled CPU function; call it on numpy arrays (outputs written in place).

    The call path is cheap: the argument checks compare against shapes and dtypes prepared at
    build time, and the arrays are passed to a generated wrapper that reads their data pointers
    itself (about a microsecond per call instead of ~10 with ctypes pointer conversions).
    Built from a lowered function, or (:meth:`from_ir`) from the LLVM IR text a compiled
    network module stores, which JIT-compiles without lowering anything.
    """

    def __init__(self, func: PrimFunc, args: Sequence[Tensor], **opts: Any):
        outputs = [k for k, a in enumerate(args) if not isinstance(a.op, PlaceholderOp)]
        self._setup(llvm_ir(func), func.name, func.params, outputs, **opts)
        self.func = func

    @classmethod
    def from_ir(cls, ir: str, name: str, params: Sequence[Buffer], outputs: Sequence[int],
                **opts: Any) -> CpuModule:
        """JIT the LLVM IR of :func:`llvm_ir` (function ``name`` taking ``params``; the
        indices ``outputs`` are written)."""
        self = cls.__new__(cls)
        self._setup(ir, name, params, list(outputs), **opts)
        self.func = None
        return self

    def _setup(self, ir: str, name: str, params: Sequence[Buffer], outputs: list[int],
               opt_level: int = 3, prefer_256_bit: bool = True, unroll: bool = True,
               nontemporal_stores: bool = False, object_cache: Path | None = None) -> None:
        """JIT ``ir``. ``object_cache``: a directory keeping the machine code of each module
        (keyed by its IR, options, CPU and LLVM version); a hit skips optimisation and code
        generation (``optimized_ir`` is then None)."""
        llvm = _llvm()
        self.name, self.params, self.outputs = name, list(params), outputs
        # non-temporal stores are marked after optimisation: on the IR they would keep the loop
        # vectoriser away (a vector NT store needs an alignment numpy arrays do not promise)
        self.llvm_ir = ir
        fast = _array_layout_ok()
        text = self.llvm_ir
        if fast:
            text += _wrapper_globals(params) + "".join(
                _array_wrapper(name, params, outputs, flat) for flat in (False, True))
        mod = llvm.parse_assembly(text)
        mod.verify()
        target = llvm.Target.from_default_triple()
        features = llvm.get_host_cpu_features().flatten()
        if prefer_256_bit and "+avx512f" in features:
            # 512-bit vectors lower the clock of many x86 cores; LLVM's own default for -O3
            features += ",+prefer-256-bit"
        self.tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=features,
                                               opt=3, codemodel="jitdefault")
        cached = None
        if object_cache is not None:
            key = hashlib.sha256("\0".join([
                text, repr((opt_level, prefer_256_bit, unroll, nontemporal_stores)),
                llvm.get_host_cpu_name(), features, ".".join(map(str, llvm.llvm_version_info))
            ]).encode()).hexdigest()[:32]
            cached = object_cache / f"{key}.o"
        cached_obj = _load(cached) if cached is not None else None
        self.optimized_ir = None
        if cached_obj is None:
            pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pto.loop_unrolling = unroll
            pb = llvm.create_pass_builder(self.tm, pto)
            mpm = pb.getModulePassManager()
            mpm.run(mod, pb)
            self.optimized_ir = str(mod)
            if nontemporal_stores:
                self.optimized_ir = _mark_nontemporal(self.optimized_ir, name)
                mod = llvm.parse_assembly(self.optimized_ir)
                mod.verify()
        self.engine = llvm.create_mcjit_compiler(mod, self.tm)
        if cached is not None:
            self.engine.set_object_cache(lambda _m, obj: _store(cached, obj),
                                         lambda _m: cached_obj)
        self.engine.finalize_object()
        if fast:
            _set_wrapper_globals(self.engine, params)
        addr = self.engine.get_function_address(name)
        n = len(params)
        self._cfn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n)(addr)
        self._afn = self._ffn = None
        if fast:
            # the GIL is released during the call (CFUNCTYPE), as for the pointer path
            ftype = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.py_object] * n)
            self._afn = ftype(self.engine.get_function_address(f"{name}__arrays"))
            self._ffn = ftype(self.engine.get_function_address(f"{name}__flat"))
        self._expect = [(tuple(p.shape), np.dtype(p.dtype), k in outputs)
                        for k, p in enumerate(params)]

    @property
    def ir(self) -> str:
        """The loop IR it was built from (the LLVM IR when built by :meth:`from_ir`)."""
        return str(self.func) if self.func is not None else self.llvm_ir

    def __call__(self, *arrays: np.ndarray) -> None:
        if len(arrays) != len(self._expect):
            raise CodegenError(f"{self.name} takes {len(self._expect)} arrays, got "
                               f"{len(arrays)}")
        if self._afn is not None and self._afn(*arrays) == 0:
            return  # checked and run natively
        for a, (shape, dt, out) in zip(arrays, self._expect):
            if not (isinstance(a, np.ndarray) and a.shape == shape and a.dtype == dt
                    and a.flags.c_contiguous and (not out or a.flags.writeable)):
                self._bad(arrays)
        self._cfn(*[a.ctypes.data for a in arrays])

    @property
    def flat_entry(self) -> Any:
        """The native entry behind :meth:`call_flat`, ``f(*arrays) -> 0 (ran) | 1 (refused)``,
        or None when array objects cannot be read natively (for callers that count every
        microsecond)."""
        return self._ffn

    def call_flat(self, *arrays: np.ndarray) -> bool:
        """Run on arrays that are C-contiguous ndarrays of the parameters' dtypes and element
        counts (any shape; outputs writable), checked natively; returns False without running
        when one is not (convert it and call again, or call the module to get the error)."""
        return self._ffn is not None and len(arrays) == len(self._expect) and \
            self._ffn(*arrays) == 0

    def _bad(self, arrays: Sequence[np.ndarray]) -> None:
        for a, p, (shape, dt, out) in zip(arrays, self.params, self._expect):
            ok = isinstance(a, np.ndarray) and a.shape == shape and a.dtype == dt \
                and a.flags.c_contiguous and (not out or a.flags.writeable)
            if not ok:
                what = "a writable C-contiguous" if out else "a C-contiguous"
                raise CodegenError(f"argument {p.name}: expected {what} "
                                   f"{p.dtype}{list(p.shape)} array, got "
                                   f"{getattr(a, 'dtype', type(a))}"
                                   f"{list(getattr(a, 'shape', []))}")


def build_cpu(sch: Schedule, args: Sequence[Tensor], name: str = "main", **kw: Any) -> CpuModule:
    return CpuModule(lower(sch, args, name), args, **kw)


__all__ = ["CpuModule", "build_cpu", "llvm_ir"]
