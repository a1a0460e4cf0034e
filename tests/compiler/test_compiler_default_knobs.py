"""Default-knob search and the code generation it times: the fast paths give what the plain
evaluation gives.

- Every micro-kernel's micro-ops (code generation runs each kernel body compiled once, with a
  memo) equal a plain walk of the kernel's IR, written here independently.
- The search's choice is the argmin of ``program_cycles`` over every valid setting (ties by
  knob tuple), both where it ranks every setting and where the space is larger than its
  budget (ranking on reduced programs, then best-neighbour descent), and its cycles are those
  of that setting rebuilt from scratch.
- A reduced program is the same template on a layer cut to a few outer tile iterations; its
  scale is the exact ratio of the full layer's outer tile iterations to its own.
"""

from __future__ import annotations

import gc
import itertools
import json

import pytest
from vta.compiler import lower_vta, topi
from vta.compiler.build import vta_pipeline
from vta.compiler.codegen import vta as cg
from vta.compiler.lower import lower
from vta.compiler.tir.expr import Binary, Cast, Const, Select, Var
from vta.compiler.tir.stmt import Alu, Dma, For, Gemm, If, UopKernel, stmt_children, walk
from vta.compiler.topi import defaults
from vta.compiler.topi import vta as T
from vta.isa import Config


@pytest.fixture(scope="module")
def cfg() -> Config:
    return Config()


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VTA_CACHE_DIR", str(tmp_path))


#: the host's integer operators (Python's: floor division and modulo, as the IR defines them)
_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min, "max": max,
        "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b,
        "and": lambda a, b: int(bool(a) and bool(b)), "or": lambda a, b: int(bool(a) or bool(b)),
        "lt": lambda a, b: int(a < b), "le": lambda a, b: int(a <= b),
        "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b)}


def _ev(e, env: dict) -> int:
    """An index expression's value with the loop variables of ``env``, by walking it (not
    the generated host code under test)."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Cast):
        return _ev(e.value, env)
    if isinstance(e, Select):
        return _ev(e.t, env) if _ev(e.cond, env) else _ev(e.f, env)
    assert isinstance(e, Binary), f"not an index expression: {e}"
    return _OPS[e.op](_ev(e.a, env), _ev(e.b, env))


def _plain_uops(k: UopKernel, env: dict) -> list[tuple[int, int, int]]:
    """The micro-ops of one kernel instance by walking its IR (folded loop variables at 0)."""
    env = {**env, **{lp.var: 0 for lp in k.loops}}
    out: list[tuple[int, int, int]] = []

    def ev(e) -> int:
        return _ev(e, env)

    def visit(s) -> None:
        if isinstance(s, For):
            for i in range(s.extent):
                env[s.var] = i
                visit(s.body)
        elif isinstance(s, Gemm):
            d = s.dst.base + ev(s.dst_index)
            out.append((d, 0, 0) if s.reset else
                       (d, s.src.base + ev(s.src_index), s.wgt.base + ev(s.wgt_index)))
        elif isinstance(s, Alu):
            d = s.dst.base + ev(s.dst_index)
            out.append((d, d if s.use_imm else s.src.base + ev(s.src_index), 0))
        else:
            for c in stmt_children(s):
                visit(c)

    visit(k.body)
    return out


def _kernel_instances(func) -> list[tuple[UopKernel, dict]]:
    """Every (kernel, enclosing loop values) the code generator visits."""
    out = []

    def visit(s, env) -> None:
        if isinstance(s, UopKernel):
            out.append((s, dict(env)))
        elif isinstance(s, For):
            for i in range(s.extent):
                env[s.var] = i
                visit(s.body, env)
            del env[s.var]
        else:
            for c in stmt_children(s):
                visit(c, env)

    visit(func.body, {})
    return out


def _small_func(cfg, which: str, conv_knobs: dict | None = None):
    """A small dense, 3x3 conv or strided 1x1 conv (``which``), lowered (conv knobs: the
    template's defaults unless given)."""
    op = _small_op(cfg, which, conv_knobs)
    return lower_vta(op.sch, op.args, cfg, op.name, verify_each=False, **op.build_opts)


def _small_op(cfg, which: str, conv_knobs: dict | None = None):
    """The unbuilt operator of :func:`_small_func`."""
    if which == "dense":
        op = topi.dense_packed((1, 4, 1, 16), (6, 4, 16, 16), config=cfg, bias=True, shift=7,
                               target=None, knobs={"tile_b": 1, "tile_ci": 2, "tile_co": 3,
                                                    "oc_nthread": 2})
    else:
        k, s, p = (3, 1, 1) if which == "conv3x3" else (1, 2, 0)
        op = topi.conv2d_packed((1, 2, 8, 8, 1, 16), (4, 2, k, k, 16, 16), strides=(s, s),
                                padding=(p, p), bias=True, shift=7, relu=True, config=cfg,
                                target=None, knobs=conv_knobs)
    return op


@pytest.mark.parametrize("which", ["conv3x3", "conv1x1s2", "dense"])
def test_compiled_micro_kernels_equal_a_plain_walk(cfg, which):
    func = _small_func(cfg, which)
    inst = _kernel_instances(func)
    assert inst and any(isinstance(x, Gemm) for k, _ in inst for x in walk(k.body))
    codes = {}
    for k, env in inst:
        kc = codes.setdefault(id(k), cg._KernelCode(k, cfg))
        args = tuple(env[v] for v in kc.params)
        assert kc(args).kernel[1] == len(_plain_uops(k, env))
        assert list(kc.uops(args)) == _plain_uops(k, env)


def _cyclic_garbage(fn) -> int:  # noqa: ANN001
    """Objects the cyclic collector finds unreachable after ``fn()`` (0: everything it made
    and dropped was freed by reference counting)."""
    gc.collect()
    gc.disable()
    try:
        fn()
        return gc.collect()
    finally:
        gc.enable()


@pytest.mark.parametrize("which", ["conv3x3", "conv1x1s2", "dense"])
def test_lowering_a_candidate_leaves_no_cyclic_garbage(cfg, which):
    """Lowering, the VTA passes and the micro-kernel code of a candidate make no reference
    cycles (recursive closures did: a knob search then spent a tenth of its time in the
    cyclic collector)."""
    op = _small_op(cfg, which)
    func0 = lower(op.sch, op.args, op.name)
    assert _cyclic_garbage(lambda: lower(op.sch, op.args, op.name)) == 0
    assert _cyclic_garbage(lambda: vta_pipeline(cfg, verify_each=False)(func0)) == 0
    func = vta_pipeline(cfg, verify_each=False)(func0)
    kernels = list({id(k): k for k, _ in _kernel_instances(func)}.values())
    assert kernels
    assert _cyclic_garbage(lambda: [cg._KernelCode(k, cfg) for k in kernels]) == 0


class _LogQueue:
    """Records the DMA calls commands make (micro-kernel pushes are checked above)."""

    def __init__(self):
        self.calls = []

    def load_buffer_2d(self, buf, off, x, y, stride, **kw):
        self.calls.append(("load", id(buf), off, x, y, stride, tuple(sorted(kw.items()))))

    def store_buffer_2d(self, sram, mem, buf, off, x, y, stride):
        self.calls.append(("store", sram, mem, id(buf), off, x, y, stride))

    def kernel(self, sig, build):
        return sig

    def push_gemm(self, kern):
        pass

    push_alu = push_gemm


def _plain_dma_calls(func, bufs) -> tuple[list, int]:
    """The LOAD/STORE calls of ``func`` by walking its loops (the padding clipped to the
    tensor along each axis), and how many micro-kernel instances it runs."""
    out = []
    kernels = [0]

    def visit(s, env) -> None:
        if isinstance(s, For):
            for i in range(s.extent):
                visit(s.body, {**env, s.var: i})
        elif isinstance(s, If):
            if _ev(s.cond, env):
                visit(s.then, env)
            elif s.else_ is not None:
                visit(s.else_, env)
        elif isinstance(s, Dma):
            sram, dram = s.sram.base + _ev(s.sram_index, env), _ev(s.dram_index, env)
            dev = bufs[s.dram]
            if s.direction == "store":
                out.append(("store", sram, "out", id(dev), dram, s.x_size, s.y_size,
                            s.x_stride))
                return
            pads = []
            for p, n in ((s.pad_y, s.y_size), (s.pad_x, s.x_size)):
                inside = range(n) if p is None else \
                    [i for i in range(n) if p.lo <= _ev(p.start, env) + i < p.hi]
                pads += [inside[0], n - 1 - inside[-1]]
            y0, y1, x0, x1 = pads
            mem = {"local.inp_buffer": "inp", "local.wgt_buffer": "wgt",
                   "local.acc_buffer": "acc"}[s.sram.scope]
            kw = dict(x_pad_before=x0, y_pad_before=y0, x_pad_after=x1, y_pad_after=y1,
                      dst_sram_index=sram, dst_memory_type=mem)
            out.append(("load", id(dev), dram + y0 * s.x_stride + x0, s.x_size - x0 - x1,
                        s.y_size - y0 - y1, s.x_stride, tuple(sorted(kw.items()))))
        elif isinstance(s, UopKernel):
            kernels[0] += 1
        else:
            for c in stmt_children(s):
                visit(c, env)

    visit(func.body, {})
    return out, kernels[0]


@pytest.mark.parametrize("which", ["conv3x3", "conv1x1s2", "dense"])
def test_generated_host_loops_equal_a_plain_walk(cfg, which):
    func = _small_func(cfg, which, conv_knobs={"tile_h": 4, "h_nthread": 2})
    bufs = {p: object() for p in func.params}
    q = _LogQueue()
    cmds = cg.commands(func, cfg, bufs)
    for c in cmds:
        c.issue(q)
    calls, kernels = _plain_dma_calls(func, bufs)
    assert q.calls and q.calls == calls
    assert kernels and sum(c.kernel is not None for c in cmds) == kernels == \
        len(cmds) - len(calls)


def _exhaustive(space, valid, cost, insns=None):
    """The fastest valid setting (ties: the smaller knob tuple); with ``insns``, of the valid
    settings within defaults.TIE of the fastest, the one with the fewest instructions."""
    names = list(space)
    timed = {vals: cost(dict(zip(names, vals))) for vals in itertools.product(*space.values())
             if valid(dict(zip(names, vals)))}
    best = min(timed, key=lambda v: (timed[v], v))
    if insns is not None:
        near = [v for v in timed if timed[v] <= timed[best] * (1 + defaults.TIE)]
        best = min(near, key=lambda v: (insns(dict(zip(names, v))), timed[v], v))
    return dict(zip(names, best)), timed[best]


@pytest.mark.parametrize("shape", [((1, 1, 4, 4), (1, 1, 3, 3), (1, 1), (1, 1, 1, 1), 15),
                                   ((1, 4, 7, 7), (4, 4, 1, 1), (1, 1), (0, 0, 0, 0), 60),
                                   ((1, 1, 8, 8), (2, 1, 3, 3), (2, 2), (1, 1, 1, 1), 45),
                                   ((1, 4, 7, 7), (4, 4, 2, 2), (1, 1), (0, 0, 1, 1), 60)])
def test_conv2d_default_is_the_exhaustive_argmin(cfg, shape):
    data, kernel, strides, pads, n_expected = shape
    epi = topi.Epilogue(bias=True, shift=7, relu=True, clip=(0, 127))
    ds, ks = (*data, cfg.batch, cfg.block_in), (*kernel, cfg.block_out, cfg.block_in)
    space = T.conv2d_knob_space(ds, ks, strides, pads, (1, 1))

    def valid(k):
        return T.conv2d_valid(k, ds, ks, strides, pads, cfg, (1, 1), 1)

    def program(k):
        op = topi.conv2d_packed(ds, ks, config=cfg, strides=strides, padding=pads, knobs=k,
                                target=None, bias=True, shift=7, relu=True, clip=(0, 127))
        return defaults.program_cycles(op)

    def cost(k):
        return program(k)[0]

    def insns(k):
        return program(k)[1].insn_count

    n_valid = sum(valid(dict(zip(space, v))) for v in itertools.product(*space.values()))
    assert n_valid == n_expected
    ch = defaults.conv2d_default(data, kernel, strides, pads, (1, 1), 1, cfg, epi)
    knobs, cycles = _exhaustive(space, valid, cost, insns)
    assert ch.knobs == knobs and ch.cycles == cycles == cost(ch.knobs)
    if n_valid <= defaults.BUDGET:  # every setting ranked
        assert ch.evaluated == n_valid
    else:  # seeds + descent: fewer settings ranked than the space holds
        assert ch.evaluated <= defaults.BUDGET + defaults.FINALISTS < n_valid
    again = defaults.conv2d_default(data, kernel, strides, pads, (1, 1), 1, cfg, epi)
    assert again.cached and again.knobs == ch.knobs and again.cycles == ch.cycles


def test_dense_default_is_the_exhaustive_argmin(cfg):
    n, k, m = 1, 8, 4
    epi = topi.Epilogue(bias=True, shift=7, clip=(-128, 127))
    space = T.dense_knob_space(n, k, m)

    def cost(kn):
        op = topi.dense_packed((n, k, cfg.batch, cfg.block_in), (m, k, cfg.block_out,
                               cfg.block_in), config=cfg, knobs=kn, target=None, bias=True,
                               shift=7, clip=(-128, 127))
        return defaults.program_cycles(op)[0]

    valid = lambda v: T.dense_valid(v, n, k, m, cfg)  # noqa: E731
    n_valid = sum(valid(dict(zip(space, v))) for v in itertools.product(*space.values()))
    assert n_valid <= defaults.BUDGET
    ch = defaults.dense_default(n, k, m, cfg, epi)
    assert (ch.knobs, ch.cycles) == _exhaustive(space, valid, cost)


@pytest.mark.parametrize("layer", [
    ((1, 4, 14, 14), (8, 4, 3, 3), (1, 1), (1, 1, 1, 1), 1,
     {"tile_b": 1, "tile_h": 2, "tile_w": 7, "tile_ci": 2, "tile_co": 2, "oc_nthread": 2,
      "h_nthread": 1}),
    ((1, 2, 15, 16), (2, 2, 3, 3), (2, 2), (1, 1, 1, 1), 1,
     {"tile_b": 1, "tile_h": 1, "tile_w": 2, "tile_ci": 1, "tile_co": 1, "oc_nthread": 1,
      "h_nthread": 2}),
    ((1, 6, 12, 12), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1), 6,
     {"tile_b": 1, "tile_h": 3, "tile_w": 12, "tile_ci": 1, "tile_co": 1, "oc_nthread": 1,
      "h_nthread": 1}),
    ((1, 2, 7, 7), (2, 2, 1, 1), (1, 1), (0, 0, 0, 0), 1,
     {"tile_b": 1, "tile_h": 7, "tile_w": 7, "tile_ci": 2, "tile_co": 1, "oc_nthread": 2,
      "h_nthread": 1}),
])
def test_reduced_conv2d_is_the_layer_cut_to_a_few_tile_iterations(cfg, layer):
    data, kernel, strides, pads, groups, k = layer
    d, kr, g, scale = defaults.conv2d_reduced(k, data, kernel, strides, pads, (1, 1), groups)

    def tiles(dd, kk):  # outer tile iterations, counted from the shapes
        oh, ow = T.conv2d_out_hw(dd[2], dd[3], kk[2], kk[3], strides, pads)
        return (dd[0] // k["tile_b"]) * (kk[0] // k["tile_co"]) * (oh // k["tile_h"]) \
            * (ow // k["tile_w"])

    oh, ow = T.conv2d_out_hw(d[2], d[3], kr[2], kr[3], strides, pads)
    assert oh // k["tile_h"] <= defaults.REDUCED_ITERS * k["h_nthread"]
    assert ow // k["tile_w"] <= defaults.REDUCED_ITERS
    assert kr[0] // k["tile_co"] <= defaults.REDUCED_ITERS * k["oc_nthread"] or groups > 1
    assert scale == tiles(data, kernel) / tiles(d, kr)
    assert d[1] == kr[1] * g and kr[0] % g == 0  # whole groups, their input tiles with them
    ds, ks = (*d, cfg.batch, cfg.block_in), (*kr, cfg.block_out, cfg.block_in)
    assert T.conv2d_valid(k, ds, ks, strides, pads, cfg, (1, 1), g)
    if scale == 1:
        assert (d, kr, g) == (data, kernel, groups)


def test_search_starts_from_every_seed_key_per_thread_arrangement():
    # a cost whose optimum is the largest setting by the second key only, with neighbours of
    # the first key's seed all worse than it: one-knob steps cannot get there from that seed
    space = {"a": [1, 2, 4], "b": [1, 2, 4], "c": [1, 2, 4], "oc_nthread": [1, 2]}

    def valid(k: dict[str, int]) -> bool:
        return k["a"] * k["b"] <= 4

    def cost(k: dict[str, int]) -> float:
        if (k["b"], k["oc_nthread"]) == (4, 1):
            return 1.0
        return 100.0 - k["a"] - k["c"] + k["b"]

    by_a = (lambda k: (k["a"], k["c"]),)
    by_b = (lambda k: (k["a"], k["c"]), lambda k: (k["b"], k["c"]))
    assert defaults.search(space, valid, by_a, cost, budget=8).cycles > 1.0
    best = defaults.search(space, valid, by_b, cost, budget=8)
    assert best.cycles == 1.0 and best.knobs["b"] == 4 and best.knobs["oc_nthread"] == 1


def test_search_ties_within_tie_go_to_the_fewest_instructions():
    # cycles 1000, 1000 (1 + TIE / 2), 1000 (1 + 2 TIE); instructions 30, 20, 10
    space = {"a": [1, 2, 4]}
    cost = {1: 1000.0, 2: 1000.0 * (1 + defaults.TIE / 2), 4: 1000.0 * (1 + 2 * defaults.TIE)}
    insns = {1: 30, 2: 20, 4: 10}

    def run(**kw):
        return defaults.search(space, lambda k: True, (lambda k: (k["a"],),),
                               lambda k: cost[k["a"]], **kw)

    assert run().knobs == {"a": 1}  # without instruction counts: the fastest
    ch = run(insns=lambda k: insns[k["a"]])
    assert ch.knobs == {"a": 2} and ch.cycles == cost[2]  # a = 4 is beyond the tie


@pytest.mark.parametrize("damage", ["cycles-edited", "truncated", "garbage", "nested",
                                    "knobs-mistyped"])
def test_damaged_knob_cache_entry_is_searched_again(cfg, tmp_path, damage):
    """A cache entry whose sha256 does not hold (edited, truncated, overwritten) or that is
    not an entry at all is not trusted: the search runs again (``cached`` False), gives the
    knobs of a fresh search, and rewrites a whole entry that the next call reads."""
    epi = topi.Epilogue(bias=True, shift=7, relu=True, clip=(0, 127))
    args = ((1, 1, 4, 4), (1, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, cfg, epi)
    first = defaults.conv2d_default(*args)
    (entry,) = (tmp_path / "knobs").glob("*.json")
    d = json.loads(entry.read_text())
    text = {"cycles-edited": json.dumps(d | {"cycles": 1.0}),
            "truncated": entry.read_text()[:40],
            "garbage": "\x00\xff not json",
            "nested": "[" * 3000 + "]" * 3000,
            "knobs-mistyped": json.dumps(d | {"knobs": {"tile_h": "16"}})}[damage]
    entry.write_text(text)
    again = defaults.conv2d_default(*args)
    assert not again.cached and (again.knobs, again.cycles) == (first.knobs, first.cycles)
    third = defaults.conv2d_default(*args)
    assert third.cached and (third.knobs, third.cycles) == (first.knobs, first.cycles)
