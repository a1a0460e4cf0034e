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
from ..tir.expr import Const, Expr, Var, py_source
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
    PadSpec,
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


def commands(func: PrimFunc, cfg: Config, buffers: dict[Buffer, Any]) -> list[Command]:
    """The command stream of ``func`` with concrete addresses (tokens not yet placed)."""
    leaves: list[Callable[..., Command]] = []
    host = _HostSource(leaves, cfg, buffers)
    src = host.function(func.body)
    out: list[Command] = []
    _compiled(src, "_host")(out.append, leaves, tuple(host.consts.values))
    return out


class _Consts:
    """The constants of a generated function: each occurrence is a name ``c<k>`` bound from
    the function's argument ``C`` (the values in order), not a literal, so functions that
    differ only in their constants (knob-search candidates of one template) share one source,
    compiled once (:func:`_compiled`)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: list[int | float] = []

    def name(self, value: int | float) -> str:
        """The name of a new constant of ``value``."""
        self.values.append(value)
        return f"c{len(self.values) - 1}"

    def of(self, c: Const) -> str:
        """The name of a new constant of an IR constant's value (:func:`py_source`)."""
        return self.name(c.value)

    def unpack(self) -> list[str]:
        """The function body's first line, binding the names from ``C`` (none without
        constants)."""
        if not self.values:
            return []
        return [f"    {''.join(f'c{k}, ' for k in range(len(self.values)))}= C"]


class _HostSource:
    """The host loops of a lowered function as the source of one Python function
    ``_host(ap, L, C)``: its loops are Python loops, and every :class:`Dma` or
    :class:`UopKernel` a call ``ap(L[k](...))`` of the command maker ``L[k]`` (a
    :class:`_DmaCode` or :class:`_KernelCode`, appended to ``leaves``) on the values of its
    index expressions. Code generation runs it once instead of walking the IR for every
    iteration of every loop. Its constants (loop extents, those of the index expressions)
    are the values ``C`` (:attr:`consts`, a :class:`_Consts`)."""

    def __init__(self, leaves: list[Callable[..., Command]], cfg: Config,
                 buffers: dict[Buffer, Any]) -> None:
        self.leaves, self.cfg, self.buffers = leaves, cfg, buffers
        self.names: dict[int, str] = {}  # id(loop variable) -> its Python name, while in scope
        self.lines: list[str] = []
        self.loops = 0
        self.consts = _Consts()

    def function(self, body: Stmt) -> str:
        self.stmt(body, 1)
        head = ["def _host(ap, L, C):"]
        if self.leaves:
            head.append(f"    {''.join(f'L{k}, ' for k in range(len(self.leaves)))}= L")
        return "\n".join([*head, *self.consts.unpack(), *self.lines, "    return None"])

    def expr(self, e: Expr) -> str:
        def unbound(v: Var) -> str:
            raise CodegenError(f"variable {v.name} is not bound when evaluating {e}")

        return py_source(e, self.names, unbound, self.consts.of)

    def leaf(self, maker: Callable[..., Command], args: list[str], pad: str) -> None:
        self.lines.append(f"{pad}ap(L{len(self.leaves)}({', '.join(args)}))")
        self.leaves.append(maker)

    def stmt(self, s: Stmt, depth: int) -> None:
        pad = "    " * depth
        if isinstance(s, Dma):
            pads = [self.expr(p.start) if p is not None else "0" for p in (s.pad_y, s.pad_x)]
            self.leaf(_DmaCode(s, self.buffers), [self.expr(s.sram_index),
                                                  self.expr(s.dram_index), *pads], pad)
        elif isinstance(s, UopKernel):
            code = _KernelCode(s, self.cfg)
            for v in code.params:
                if id(v) not in self.names:
                    raise CodegenError(f"variable {v.name} is not bound in a micro-kernel")
            self.leaf(code, [f"({''.join(self.names[id(v)] + ', ' for v in code.params)})"],
                      pad)
        elif isinstance(s, For):
            self.loop(s, depth)
        elif isinstance(s, Seq):
            for c in s.stmts:
                self.stmt(c, depth)
        elif isinstance(s, (Allocate, Attr)):
            self.stmt(s.body, depth)
        elif isinstance(s, If):
            self.lines.append(f"{pad}if {self.expr(s.cond)}:")
            self.block(s.then, depth + 1)
            if s.else_ is not None:
                self.lines.append(f"{pad}else:")
                self.block(s.else_, depth + 1)
        elif not isinstance(s, Nop):
            raise CodegenError(f"{type(s).__name__} cannot run on VTA (run the VTA passes first)")

    def loop(self, s: For, depth: int) -> None:
        name = self.names[id(s.var)] = f"i{self.loops}"
        self.loops += 1
        if s.extent == 1:  # no Python loop: nested loops are limited (20 blocks)
            self.lines.append(f"{'    ' * depth}{name} = 0")
            self.stmt(s.body, depth)
        else:
            self.lines.append(f"{'    ' * depth}for {name} in range({self.consts.name(s.extent)}):")
            self.block(s.body, depth + 1)
        del self.names[id(s.var)]

    def block(self, s: Stmt, depth: int) -> None:
        n = len(self.lines)
        self.stmt(s, depth)
        if len(self.lines) == n:
            self.lines.append(f"{'    ' * depth}pass")


class _DmaCode:
    """Makes the LOAD/STORE command of one :class:`Dma` from the values of its index
    expressions (SRAM index, DRAM index, the starts of its row and column padding)."""

    def __init__(self, s: Dma, buffers: dict[Buffer, Any]) -> None:
        if s.dram not in buffers:
            raise CodegenError(f"no device buffer for {s.dram.name}")
        self.s, self.dev_buf = s, buffers[s.dram]
        self.sram = (_extent(s.sram),)
        self.base = s.sram.base
        self.store = s.direction == "store"
        self.mem = _MEM.get(s.sram.scope)
        self.module = STORE if self.store else COMPUTE if self.mem == "acc" else LOAD
        self.what = f"store {s.dram.name}" if self.store else f"load {s.sram.name}"

    def __call__(self, sram_i: int, dram_i: int, y_start: int, x_start: int) -> Command:
        s, dev_buf, sram_idx = self.s, self.dev_buf, self.base + sram_i
        if self.store:
            y, x, stride = s.y_size, s.x_size, s.x_stride

            def store(q: Any) -> None:
                q.store_buffer_2d(sram_idx, "out", dev_buf, dram_i, x, y, stride)

            writes = ((id(dev_buf), dram_i, dram_i + (y - 1) * stride + x),)
            return Command(STORE, s.thread, store, self.what, sram=self.sram,
                           dram_writes=writes)
        y0, y1 = _pads(s.pad_y, y_start, s.y_size)
        x0, x1 = _pads(s.pad_x, x_start, s.x_size)
        y_size = s.y_size - y0 - y1
        x_size = s.x_size - x0 - x1
        dram_idx = dram_i + y0 * s.x_stride + x0
        if y_size <= 0 or x_size <= 0:
            raise CodegenError(f"load of {s.sram.name}: the block lies entirely in the padding; "
                               "use a tile that overlaps the tensor")
        if max(y0, y1, x0, x1) > 15:
            raise CodegenError(f"load of {s.sram.name}: padding of {max(y0, y1, x0, x1)} "
                               "exceeds the 4-bit pad fields (15)")
        mem, stride = self.mem, s.x_stride

        def load(q: Any) -> None:
            q.load_buffer_2d(dev_buf, dram_idx, x_size, y_size, stride, x_pad_before=x0,
                             y_pad_before=y0, x_pad_after=x1, y_pad_after=y1,
                             dst_sram_index=sram_idx, dst_memory_type=mem)

        return Command(self.module, s.thread, load, self.what, sram=self.sram)


def _pads(p: PadSpec | None, start: int, ext: int) -> tuple[int, int]:
    """The zero padding (before, after) of a DMA axis of ``ext`` entries from ``start``."""
    if p is None:
        return 0, 0
    return min(max(p.lo - start, 0), ext), min(max(ext - (p.hi - start), 0), ext)


class _KernelCode:
    """Makes the GEMM/ALU command of one :class:`UopKernel` from the values of the enclosing
    loop variables it reads (:attr:`params`). Its body is compiled once into a Python function
    of them that returns its micro-op list (``(dst, src, wgt)`` in visiting order, the folded
    loop variables at zero): codegen runs it for every instance of the kernel instead of
    walking the IR again, once per distinct micro-op list (memoised)."""

    def __init__(self, k: UopKernel, cfg: Config) -> None:
        self.k, self.cfg = k, cfg
        leaves = k.leaves
        if not leaves:
            raise CodegenError("a micro-kernel without GEMM or ALU micro-ops")
        s0 = leaves[0]
        self.sig = ("gemm", s0.reset) if isinstance(s0, Gemm) else \
            ("alu", s0.op, s0.use_imm, s0.imm or 0)
        self._names: dict[int, str] = {id(lp.var): "0" for lp in k.loops}
        self.params: list[Var] = []
        self._consts = consts = _Consts()
        lines: list[str] = []
        self._gen(k.body, 1, lines)
        del self._names, self._consts
        head = f"def _uops(C, {''.join(f'p{n}, ' for n in range(len(self.params)))}):"
        src = "\n".join([head, *consts.unpack(), "    u = []", "    ap = u.append", *lines,
                         "    return u"])
        #: the micro-op list of values of :attr:`params` (its first argument: the constants)
        self.fn: Callable[..., list[tuple[int, int, int]]] = _compiled(src, "_uops")
        self.consts = tuple(consts.values)
        self.memo: dict[tuple[int, ...], tuple[tuple[int, int, int], ...]] = {}
        #: what the commands of each memoised micro-op list share (by the list's id)
        self.made: dict[int, tuple[Callable[[Any], None], str, tuple[Any, int]]] = {}
        self.loops = tuple((lp.extent, lp.dst_factor, lp.src_factor, lp.wgt_factor)
                           for lp in k.loops)
        bufs = {id(b): b for leaf in leaves
                for b in (leaf.dst, leaf.src, getattr(leaf, "wgt", None)) if b is not None}
        self.sram = tuple(_extent(b) for b in bufs.values())

    def _name_of(self, v: Var) -> str:
        """The generated function's name of a variable the kernel body reads (a new
        parameter the first time)."""
        names = self._names
        if id(v) not in names:
            names[id(v)] = f"p{len(self.params)}"
            self.params.append(v)
        return names[id(v)]

    def _expr(self, e: Expr) -> str:
        return py_source(e, self._names, self._name_of, self._consts.of)

    def _gen(self, s: Stmt, depth: int, lines: list[str]) -> None:
        """The source lines of the body ``s`` at indentation ``depth`` (a method, not a
        recursive closure: that would be a reference cycle, garbage for the cyclic
        collector)."""
        pad = "    " * depth
        expr = self._expr
        if isinstance(s, For):
            self._names[id(s.var)] = f"i{depth}"
            lines.append(f"{pad}for i{depth} in range({self._consts.name(s.extent)}):")
            lines.append(f"{pad}    pass")
            self._gen(s.body, depth + 1, lines)
            del self._names[id(s.var)]
        elif isinstance(s, Gemm):
            base = self._consts.name
            d = f"{base(s.dst.base)} + {expr(s.dst_index)}"
            if s.reset:
                lines.append(f"{pad}ap(({d}, 0, 0))")
            else:
                lines.append(f"{pad}ap(({d}, {base(s.src.base)} + {expr(s.src_index)}, "
                             f"{base(s.wgt.base)} + {expr(s.wgt_index)}))")
        elif isinstance(s, Alu):
            base = self._consts.name
            lines.append(f"{pad}d = {base(s.dst.base)} + {expr(s.dst_index)}")
            src = "d" if s.use_imm else f"{base(s.src.base)} + {expr(s.src_index)}"
            lines.append(f"{pad}ap((d, {src}, 0))")
        else:
            for c in stmt_children(s):
                self._gen(c, depth, lines)

    def uops(self, args: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
        """The micro-ops for the values ``args`` of :attr:`params` (memoised)."""
        u = self.memo.get(args)
        if u is None:
            u = self.memo[args] = tuple(self.fn(self.consts, *args))
            if len(u) > self.cfg.uop_depth:
                raise CodegenError(
                    f"a micro-kernel on {self.k.leaves[0].dst.name} has {len(u)} micro-ops but "
                    f"the micro-op buffer has {self.cfg.uop_depth} entries; use smaller tiles "
                    "(e.g. tile_w, tile_ci)")
        return u

    def __call__(self, args: tuple[int, ...]) -> Command:
        uops = self.uops(args)
        made = self.made.get(id(uops))
        if made is None:  # uops stays alive in self.memo, so its id names it
            made = self.made[id(uops)] = _kernel_issue(self.sig, self.loops, uops)
        push, what, kernel = made
        return Command(COMPUTE, self.k.thread, push, what, sram=self.sram, kernel=kernel)


#: Host and micro-kernel functions by their generated source (the default-knob search lowers
#: many candidates whose kernels are the same code); cleared when it reaches _MAX_COMPILED.
_COMPILED: dict[str, Callable[..., Any]] = {}
_MAX_COMPILED = 4096


def _compiled(src: str, name: str) -> Callable[..., Any]:
    """The function ``name`` defined by the generated source ``src`` (memoised by source)."""
    fn = _COMPILED.get(src)
    if fn is None:
        if len(_COMPILED) >= _MAX_COMPILED:
            _COMPILED.clear()
        scope: dict[str, Any] = {}
        exec(src, scope)  # noqa: S102 - generated from our own IR
        fn = _COMPILED[src] = scope[name]
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


def _kernel_issue(leaf_sig: tuple, loops: tuple, uops: tuple
                  ) -> tuple[Callable[[Any], None], str, tuple[Any, int]]:
    """What every command running one micro-op list shares: its issue function, its
    description and its (kernel getter, micro-op count)."""
    sig = _interned(_Key((leaf_sig, loops, uops)))
    mode = leaf_sig[0]

    def build(kb: Any) -> None:
        for ext, df, sf, wf in loops:
            kb.loop_begin(ext, dst_factor=df, src_factor=sf, wgt_factor=wf)
        for d, s_, w in uops:
            if mode == "gemm":
                kb.push("gemm", reset=leaf_sig[1], dst=d, src=s_, wgt=w)
            else:
                _, op, use_imm, imm = leaf_sig
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

    return push, f"{mode} x{len(uops)}", (lambda q: q.kernel(sig, build), len(uops))


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
    got: set[int] = set()  # the (getter, count) pairs already looked at
    for c in cmds:
        if c.kernel is None or id(c.kernel) in got:
            continue  # (one pair per micro-op list: its kernel is one of ``seen``)
        got.add(id(c.kernel))
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
