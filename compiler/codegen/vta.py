"""VTA code generation: run the host loops of the lowered IR and drive a runtime CommandQueue.

The host part of a VTA operator (the loops outside micro-kernels) executes here in Python, as
TVM's generated host code did in C: every :class:`Dma` becomes ``load_buffer_2d`` /
``store_buffer_2d`` with concrete addresses and padding, every :class:`UopKernel` a memoised
runtime micro-kernel pushed with ``push_gemm`` / ``push_alu``. Dependency tokens come from
:mod:`vta.compiler.passes.sync`. The same stream can run directly (``run``) or be recorded into a
relocatable program image (``record``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vta.isa import Config

from ..errors import CodegenError
from ..passes.sync import COMPUTE, LOAD, STORE, Command, group_threads, insert_sync, issue
from ..tir.expr import Expr, Var, compile_int, free_vars, py_source
from ..tir.stmt import (
    ACC_SCOPE,
    INP_SCOPE,
    WGT_SCOPE,
    Allocate,
    Alu,
    Attr,
    Buffer,
    Dma,
    For,
    Gemm,
    If,
    Nop,
    PrimFunc,
    Seq,
    Stmt,
    UopKernel,
    stmt_children,
)

_MEM = {INP_SCOPE: "inp", WGT_SCOPE: "wgt", ACC_SCOPE: "acc"}


def _extent(b: Buffer) -> tuple[str, int, int]:
    """The on-chip entries of a scratchpad buffer, as a footprint interval."""
    if b.base is None:
        raise CodegenError(f"buffer {b.name} has no scratchpad base (run AllocateScratchpad)")
    return (b.scope, b.base, b.base + b.n_elems)


class _Eval:
    """Evaluates integer expressions with a cache of compiled Python lambdas."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple[list[Var], Callable[..., int], Expr]] = {}
        #: compiled micro-kernels by id (the kernel is kept alive beside its code)
        self.kernels: dict[int, tuple[_KernelCode, UopKernel]] = {}

    def __call__(self, e: Expr, env: dict[Var, int]) -> int:
        ent = self.cache.get(id(e))
        if ent is None:
            vs = sorted(free_vars(e), key=lambda v: id(v))
            ent = (vs, compile_int(e, vs), e)
            self.cache[id(e)] = ent
        vs, fn, _ = ent
        try:
            return int(fn(*map(env.__getitem__, vs)))
        except KeyError as k:
            raise CodegenError(f"variable {k} is not bound when evaluating {e}") from None


def commands(func: PrimFunc, cfg: Config, buffers: dict[Buffer, Any]) -> list[Command]:
    """The command stream of ``func`` with concrete addresses (tokens not yet placed)."""
    ev = _Eval()
    out: list[Command] = []

    def visit(s: Stmt, env: dict[Var, int]) -> None:
        # the leaves first: most visits are DMA and micro-kernel commands
        if isinstance(s, Dma):
            out.append(_dma(s, env, ev, buffers))
        elif isinstance(s, UopKernel):
            out.append(_kernel(s, env, ev, cfg))
        elif isinstance(s, For):
            v, body = s.var, s.body
            for i in range(s.extent):
                env[v] = i
                visit(body, env)
            del env[v]
        elif isinstance(s, Seq):
            for c in s.stmts:
                visit(c, env)
        elif isinstance(s, Allocate | Attr):
            visit(s.body, env)
        elif isinstance(s, If):
            if ev(s.cond, env):
                visit(s.then, env)
            elif s.else_ is not None:
                visit(s.else_, env)
        elif isinstance(s, Nop):
            pass
        else:
            raise CodegenError(f"{type(s).__name__} cannot run on VTA (run the VTA passes first)")

    visit(func.body, {})
    return out


def _dma(s: Dma, env: dict[Var, int], ev: _Eval, buffers: dict[Buffer, Any]) -> Command:
    sram_idx = s.sram.base + ev(s.sram_index, env)
    dram_idx = ev(s.dram_index, env)
    if s.dram not in buffers:
        raise CodegenError(f"no device buffer for {s.dram.name}")
    dev_buf = buffers[s.dram]
    if s.direction == "store":
        y, x, stride = s.y_size, s.x_size, s.x_stride

        def store(q: Any) -> None:
            q.store_buffer_2d(sram_idx, "out", dev_buf, dram_idx, x, y, stride)

        writes = ((id(dev_buf), dram_idx, dram_idx + (y - 1) * stride + x),)
        return Command(STORE, s.thread, store, f"store {s.dram.name}", sram=(_extent(s.sram),),
                       dram_writes=writes)
    pads = [0, 0, 0, 0]  # y0, y1, x0, x1
    sizes = [s.y_size, s.x_size]
    for k, p in enumerate((s.pad_y, s.pad_x)):
        if p is None:
            continue
        start = ev(p.start, env)
        ext = sizes[k]
        p0 = min(max(p.lo - start, 0), ext)
        p1 = min(max(ext - (p.hi - start), 0), ext)
        pads[2 * k], pads[2 * k + 1] = p0, p1
    y_size = s.y_size - pads[0] - pads[1]
    x_size = s.x_size - pads[2] - pads[3]
    dram_idx += pads[0] * s.x_stride + pads[2]
    mem = _MEM[s.sram.scope]
    if y_size <= 0 or x_size <= 0:
        raise CodegenError(f"load of {s.sram.name}: the block lies entirely in the padding; "
                           "use a tile that overlaps the tensor")
    if max(pads) > 15:
        raise CodegenError(f"load of {s.sram.name}: padding of {max(pads)} exceeds the 4-bit "
                           "pad fields (15)")
    module = COMPUTE if mem == "acc" else LOAD

    def load(q: Any) -> None:
        q.load_buffer_2d(dev_buf, dram_idx, x_size, y_size, s.x_stride, x_pad_before=pads[2],
                         y_pad_before=pads[0], x_pad_after=pads[3], y_pad_after=pads[1],
                         dst_sram_index=sram_idx, dst_memory_type=mem)

    return Command(module, s.thread, load, f"load {s.sram.name}", sram=(_extent(s.sram),))


class _KernelCode:
    """A micro-kernel's body compiled once into a Python function of the enclosing loop
    variables that returns its micro-op list (``(dst, src, wgt)`` in visiting order, the
    folded loop variables at zero): codegen runs it for every instance of the kernel instead
    of walking the IR again."""

    def __init__(self, k: UopKernel) -> None:
        leaves = k.leaves
        if not leaves:
            raise CodegenError("a micro-kernel without GEMM or ALU micro-ops")
        s0 = leaves[0]
        self.sig = ("gemm", s0.reset) if isinstance(s0, Gemm) else \
            ("alu", s0.op, s0.use_imm, s0.imm or 0)
        names: dict[int, str] = {id(lp.var): "0" for lp in k.loops}
        self.params: list[Var] = []
        lines: list[str] = []

        def name_of(v: Var) -> str:
            if id(v) not in names:
                names[id(v)] = f"p{len(self.params)}"
                self.params.append(v)
            return names[id(v)]

        def expr(e: Expr) -> str:
            for v in sorted(free_vars(e), key=lambda v: v.name):
                name_of(v)
            return py_source(e, names)

        def gen(s: Stmt, depth: int) -> None:
            pad = "    " * depth
            if isinstance(s, For):
                names[id(s.var)] = f"i{depth}"
                lines.append(f"{pad}for i{depth} in range({s.extent}):")
                lines.append(f"{pad}    pass")
                gen(s.body, depth + 1)
                del names[id(s.var)]
            elif isinstance(s, Gemm):
                d = f"{s.dst.base} + {expr(s.dst_index)}"
                if s.reset:
                    lines.append(f"{pad}ap(({d}, 0, 0))")
                else:
                    lines.append(f"{pad}ap(({d}, {s.src.base} + {expr(s.src_index)}, "
                                 f"{s.wgt.base} + {expr(s.wgt_index)}))")
            elif isinstance(s, Alu):
                lines.append(f"{pad}d = {s.dst.base} + {expr(s.dst_index)}")
                src = "d" if s.use_imm else f"{s.src.base} + {expr(s.src_index)}"
                lines.append(f"{pad}ap((d, {src}, 0))")
            else:
                for c in stmt_children(s):
                    gen(c, depth)

        gen(k.body, 1)
        head = f"def _uops({', '.join(f'p{n}' for n in range(len(self.params)))}):"
        src = "\n".join([head, "    u = []", "    ap = u.append", *lines, "    return u"])
        self.fn: Callable[..., list[tuple[int, int, int]]] = _compiled(src)
        self.memo: dict[tuple[int, ...], tuple[tuple[int, int, int], ...]] = {}
        #: the runtime kernel signature of each memoised micro-op list (by its id)
        self.sigs: dict[int, _Key] = {}
        self.loops = tuple((lp.extent, lp.dst_factor, lp.src_factor, lp.wgt_factor)
                           for lp in k.loops)
        bufs = {id(b): b for leaf in leaves
                for b in (leaf.dst, leaf.src, getattr(leaf, "wgt", None)) if b is not None}
        self.sram = tuple(_extent(b) for b in bufs.values())

    def uops(self, env: dict[Var, int]) -> tuple[tuple[int, int, int], ...]:
        """The micro-ops for the enclosing loop variables' values in ``env`` (memoised)."""
        try:
            args = tuple(env[v] for v in self.params)
        except KeyError as k:
            raise CodegenError(f"variable {k} is not bound in a micro-kernel") from None
        u = self.memo.get(args)
        if u is None:
            u = self.memo[args] = tuple(self.fn(*args))
        return u


#: Micro-kernel functions by their generated source (the default-knob search lowers many
#: candidates whose kernels are the same code); cleared when it reaches _MAX_COMPILED.
_COMPILED: dict[str, Callable[..., list[tuple[int, int, int]]]] = {}
_MAX_COMPILED = 4096


def _compiled(src: str) -> Callable[..., list[tuple[int, int, int]]]:
    fn = _COMPILED.get(src)
    if fn is None:
        if len(_COMPILED) >= _MAX_COMPILED:
            _COMPILED.clear()
        scope: dict[str, Any] = {}
        exec(src, scope)  # noqa: S102 - generated from our own IR
        fn = _COMPILED[src] = scope["_uops"]
    return fn


class _Key:
    """A micro-kernel's signature (a tuple of its micro-ops) with its hash computed once: the
    runtime's kernel table is looked up for every GEMM/ALU command, and a fresh tuple would be
    hashed whole each time. Equal to another key of an equal tuple; prints as the tuple."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple) -> None:
        self.value, self._hash = value, hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Key) and self._hash == other._hash
                                 and self.value == other.value)

    def __repr__(self) -> str:
        return repr(self.value)


#: One key object per signature across code generations: the runtime's kernel table (shared by
#: the knob search's recordings, vta.compiler.build) then finds a kernel by identity instead of
#: comparing micro-op tuples; cleared when it reaches _MAX_KEYS.
_KEYS: dict[_Key, _Key] = {}
_MAX_KEYS = 8192


def _interned(key: _Key) -> _Key:
    k = _KEYS.get(key)
    if k is None:
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        k = _KEYS[key] = key
    return k


def _kernel(k: UopKernel, env: dict[Var, int], ev: _Eval, cfg: Config) -> Command:
    code = ev.kernels.get(id(k))
    if code is None:
        code = ev.kernels[id(k)] = (_KernelCode(k), k)
    kc = code[0]
    uops = kc.uops(env)
    leaf_sig = [kc.sig]
    if len(uops) > cfg.uop_depth:
        leaf = k.leaves[0]
        raise CodegenError(
            f"a micro-kernel on {leaf.dst.name} has {len(uops)} micro-ops but the micro-op "
            f"buffer has {cfg.uop_depth} entries; use smaller tiles (e.g. tile_w, tile_ci)")
    loops = kc.loops
    sig = kc.sigs.get(id(uops))
    if sig is None:  # uops stays alive in kc.memo, so its id names it
        sig = kc.sigs[id(uops)] = _interned(_Key((leaf_sig[0], loops, uops)))
    mode = leaf_sig[0][0]

    def build(kb: Any) -> None:
        for ext, df, sf, wf in loops:
            kb.loop_begin(ext, dst_factor=df, src_factor=sf, wgt_factor=wf)
        for d, s_, w in uops:
            if mode == "gemm":
                kb.push("gemm", reset=leaf_sig[0][1], dst=d, src=s_, wgt=w)
            else:
                _, op, use_imm, imm = leaf_sig[0]
                kb.push("alu", reset=False, dst=d, src=s_, wgt=0, alu_opcode=op,
                        use_imm=use_imm, imm=imm)
        for _ in loops:
            kb.loop_end()

    def push(q: Any) -> None:
        kern = q.kernel(sig, build)
        if mode == "gemm":
            q.push_gemm(kern)
        else:
            q.push_alu(kern)

    return Command(COMPUTE, k.thread, push, f"{mode} x{len(uops)}", sram=kc.sram,
                   kernel=(lambda q: q.kernel(sig, build), len(uops)))


def emit(func: PrimFunc, cfg: Config, queue: Any, buffers: dict[Buffer, Any]) -> list[Command]:
    """Generate the operator's commands, make each virtual thread's commands contiguous per
    module run (:func:`~vta.compiler.passes.sync.group_threads`), place dependency tokens and
    issue them to ``queue``."""
    cmds = insert_sync(group_threads(commands(func, cfg, buffers)))
    preload_kernels(cmds, cfg, queue)
    issue(cmds, queue)
    return cmds


def preload_kernels(cmds: list[Command], cfg: Config, queue: Any) -> int:
    """Load the micro-kernels of ``cmds`` up front, in order of first use, as many as fit the
    micro-op buffer together: these LOAD UOPs carry no dependency wait, so they run while the
    load module fetches the first tiles instead of after them. Returns the micro-ops loaded."""
    if not hasattr(queue, "preload"):
        return 0
    total = 0
    seen: set[int] = set()
    for c in cmds:
        if c.kernel is None:
            continue
        get, n = c.kernel
        kern = get(queue)
        if id(kern) in seen:
            continue
        seen.add(id(kern))
        if total + n > cfg.uop_depth:
            break
        total += n
        queue.preload(kern)
    return total


__all__ = ["commands", "emit", "preload_kernels"]
