"""Per-module Fmax of the VTA hardware on ECP5 (LFE5U-85F-6, the ULX3S-85F), out of context.

Each module of :data:`MODULES` is built for the ULX3S-85F's default config (1x4x4, 64-bit bus;
``--preset``/``--config`` for another, e.g. the 1x8x8 of the figures in hw/README.md),
wrapped so that every port goes through a flip-flop (inputs registered before the module,
outputs after it: only the module's own register-to-register paths are timed), synthesized with
yosys ``synth_ecp5 -abc9`` and placed and routed by nextpnr-ecp5 ``--out-of-context`` at the
target clock. The table shows LUT4s, flip-flops, the achieved Fmax against the 100 MHz goal and
the endpoints of the critical path. The reference in the same run is the goal itself (100 MHz)
and the target nextpnr was asked for (``--freq``, 110 MHz by default: the full design routes
worse than a module alone).

    .venv/bin/python bench/bench_rtl_fmax.py [--only NAME ...] [--freq MHZ]
                                             [--keep DIR] [--list]

Each module takes from a few seconds to a few minutes (one core). Add a module by adding a
``(name, constructor)`` row to :data:`MODULES`; a constructor takes the Config and the bus width
in bytes and returns either a ``wiring.Component`` or ``(elaboratable, extra_ports)`` where
``extra_ports`` lists ``(value, is_input)`` pairs registered like component ports.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from amaranth.hdl import Elaboratable, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from record import write_record

GOAL_MHZ = 100.0
BOARD = "ulx3s-85f"

Built = wiring.Component | tuple[Elaboratable, Sequence[tuple[Value, bool]]]
Constructor = Callable[[Any, int], Built]


# --------------------------------------------------------------------------- wrapper
class RegisteredPorts(Elaboratable):
    """``dut`` with a flip-flop on every port: ``i_<name>`` -> reg -> dut, dut -> reg ->
    ``o_<name>``. ``ports`` is the list of top-level signals for ``verilog.convert``."""

    def __init__(self, dut: Elaboratable, ports: Sequence[tuple[str, Value, bool]]) -> None:
        self.dut = dut
        self.inner = list(ports)
        self.ports: list[Signal] = []
        self._wires = []
        for name, value, is_input in self.inner:
            top = Signal(len(value), name=("i_" if is_input else "o_") + name)
            self.ports.append(top)
            self._wires.append((top, Value.cast(value), is_input))

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dut = self.dut
        for top, value, is_input in self._wires:
            reg = Signal(len(value), name=f"r_{top.name}")
            if is_input:
                m.d.sync += reg.eq(top)
                m.d.comb += value.eq(reg)
            else:
                m.d.sync += reg.eq(value)
                m.d.comb += top.eq(reg)
        return m


def component_ports(comp: wiring.Component) -> list[tuple[str, Value, bool]]:
    """Every leaf port of a component as (name, value, is_input)."""
    out = []
    for path, member, value in comp.signature.flatten(comp):
        name = "__".join(str(p) for p in path)
        out.append((name, Value.cast(value), member.flow == In))
    return out


def wrap(built: Built) -> RegisteredPorts:
    if isinstance(built, wiring.Component):
        return RegisteredPorts(built, component_ports(built))
    dut, extra = built
    ports = component_ports(dut) if isinstance(dut, wiring.Component) else []
    ports += [(f"x{k}", v, is_in) for k, (v, is_in) in enumerate(extra)]
    return RegisteredPorts(dut, ports)


# --------------------------------------------------------------------------- modules
_OPTIONS: dict[str, bool] | None = None   # --core-options: instead of the board's


def _core_options() -> dict[str, Any]:
    """The hardware options the board is built with (``Board.core_options``) unless
    ``--core-options`` names others."""
    from vta.boards.registry import get_board

    return dict(get_board(BOARD).core_options) if _OPTIONS is None else dict(_OPTIONS)


def _lays(cfg):
    from vta.hw.decode import insn_layouts

    return insn_layouts(cfg)


def _dma_read(kind: str) -> Constructor:
    def build(cfg, bus_bytes: int):
        from vta.hw.dma import DMARead

        depth = {"inp": cfg.log_inp_depth, "wgt": cfg.log_wgt_depth, "acc": cfg.log_acc_depth,
                 "uop": cfg.log_uop_depth}[kind]
        elem = {"inp": cfg.inp_elem_bytes, "wgt": cfg.wgt_elem_bytes,
                "acc": cfg.acc_elem_bytes, "uop": cfg.uop_elem_bytes}[kind]
        return DMARead(mem_layout=_lays(cfg).mem, elem_bytes=elem, bus_bytes=bus_bytes,
                       addr_width=depth)
    return build


def _burst_splitter(cfg, bus_bytes: int):
    from vta.hw.axi import BurstSplitter

    return BurstSplitter(elem_bytes=cfg.wgt_elem_bytes, bus_bytes=bus_bytes)


def _read_arbiter(cfg, bus_bytes: int):
    from vta.hw.axi import ReadArbiter

    return ReadArbiter(clients=3, bus_bytes=bus_bytes)


def _fetch(cfg, bus_bytes: int):
    from vta.hw.fetch import Fetch

    return Fetch(insn_layout=_lays(cfg).insn, bus_bytes=bus_bytes)


def _load(cfg, bus_bytes: int):
    from vta.hw.load import Load

    return Load(cfg, insn_layout=_lays(cfg).insn, bus_bytes=bus_bytes)


def _token_queue(cfg, bus_bytes: int):
    from vta.hw.queues import TokenQueue

    return TokenQueue()


def _host_regs(cfg, bus_bytes: int):
    from vta.hw.core import READONLY_REGS
    from vta.hw.host import HostRegisters

    return HostRegisters(READONLY_REGS)


def _axi_ram(cfg, bus_bytes: int):
    from vta.boards.ulx3s import AxiRam

    return AxiRam(bus_width=bus_bytes * 8, ram_kib=64)


class PortStub(wiring.Component):
    """A stand-in with a given signature and no logic (its ports become the bench's ports)."""

    def elaborate(self, platform) -> Module:
        return Module()


def _uart_soc(cfg, bus_bytes: int):
    from vta.boards.ulx3s import UartSoC
    from vta.hw.core import VTACore

    core = VTACore(cfg.with_bus_width(bus_bytes * 8), options=_core_options())
    core._MustUse__silence = True
    stub = PortStub(core.signature)
    soc = UartSoC(stub, bus_width=bus_bytes * 8, ram_kib=64, uart_divisor=868)
    # the stub's outputs (the core's outputs) are driven by the bench's input registers
    extra = [(Value.cast(v), member.flow != In)
             for _, member, v in stub.signature.flatten(stub)]
    return soc, extra


class WithScratchpads(Elaboratable):
    """A module together with the scratchpads it reads and writes, so that the timed paths
    start and end at block RAM as in the core (``vta.hw.core``). ``mems`` maps a port name of
    the module to ``(kind, memory)``, kind ``"read"``, ``"read_transparent"`` (to the module's
    write port on that memory) or ``"write"``. A memory the module only reads gets a write
    port driven by the bench (as the load module's), one it only writes a read port read by
    the bench (as the store module's), so nothing is optimised away."""

    def __init__(self, dut: wiring.Component, mems: dict[str, tuple[str, Any]]) -> None:
        self.dut = dut
        self.extra = [(Value.cast(v), member.flow == In)
                      for path, member, v in dut.signature.flatten(dut) if path[0] not in mems]
        self.memories: list[Any] = []
        self.links: list[tuple[str, Any]] = []
        writes: dict[int, Any] = {}
        for port, (kind, mem) in mems.items():
            if all(mem is not other for other in self.memories):
                self.memories.append(mem)
            if kind == "write":
                gran = getattr(dut, port).signature.granularity
                writes[id(mem)] = mem.write_port(granularity=gran)
                self.links.append((port, writes[id(mem)]))
        for port, (kind, mem) in mems.items():
            if kind == "write":
                continue
            if id(mem) not in writes:
                w = writes[id(mem)] = mem.write_port()
                self.extra += [(w.addr, True), (w.data, True), (w.en, True)]
            trans = (writes[id(mem)],) if kind == "read_transparent" else ()
            self.links.append((port, mem.read_port(transparent_for=trans)))
        read_by_dut = {id(mem) for kind, mem in mems.values() if kind != "write"}
        for mem in self.memories:
            if id(mem) not in read_by_dut:
                r = mem.read_port()
                self.extra += [(r.addr, True), (r.data, False)]

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dut = self.dut
        for k, mem in enumerate(self.memories):
            m.submodules[f"mem{k}"] = mem
        for port, p in self.links:
            wiring.connect(m, getattr(self.dut, port), p)
        return m


def _compute(cfg, bus_bytes: int):
    """Compute with its scratchpads: inp/wgt (read; written by the bench's ports as by load),
    acc (one read port and the write port) and the OUT buffer (written; read by
    the bench as by store)."""
    from amaranth.lib.memory import Memory
    from vta.hw.compute import Compute

    dut = Compute(cfg, insn_layout=_lays(cfg).insn, bus_bytes=bus_bytes,
                  options=_core_options())
    inp = Memory(shape=cfg.inp_elem_bytes * 8, depth=cfg.inp_depth, init=[])
    wgt = Memory(shape=cfg.wgt_elem_bytes * 8, depth=cfg.wgt_depth, init=[])
    acc = Memory(shape=cfg.acc_elem_bytes * 8, depth=cfg.acc_depth, init=[])
    out = Memory(shape=cfg.out_elem_bytes * 8, depth=cfg.acc_depth, init=[])
    w = WithScratchpads(dut, {"inp_rd": ("read", inp), "wgt_rd": ("read", wgt),
                              "acc_wr": ("write", acc), "acc_rd": ("read", acc),
                              "out_wr": ("write", out)})
    return w, w.extra


def _store(cfg, bus_bytes: int):
    """Store reading the OUT buffer (written by the bench's ports, as by compute)."""
    from amaranth.lib.memory import Memory
    from vta.hw.store import Store

    dut = Store(cfg, insn_layout=_lays(cfg).insn, bus_bytes=bus_bytes)
    out = Memory(shape=cfg.out_elem_bytes * 8, depth=cfg.acc_depth, init=[])
    w = WithScratchpads(dut, {"out_rd": ("read", out)})
    return w, w.extra


def _load_mem(cfg, bus_bytes: int):
    """Load with the input and weight scratchpads it writes (read by the bench, as by
    compute)."""
    from amaranth.lib.memory import Memory
    from vta.hw.load import Load

    dut = Load(cfg, insn_layout=_lays(cfg).insn, bus_bytes=bus_bytes)
    inp = Memory(shape=cfg.inp_elem_bytes * 8, depth=cfg.inp_depth, init=[])
    wgt = Memory(shape=cfg.wgt_elem_bytes * 8, depth=cfg.wgt_depth, init=[])
    w = WithScratchpads(dut, {"inp_sram": ("write", inp), "wgt_sram": ("write", wgt)})
    return w, w.extra


#: (module name, constructor(cfg, bus_bytes)).
MODULES: list[tuple[str, Constructor]] = [
    ("dma_read.inp", _dma_read("inp")),
    ("dma_read.wgt", _dma_read("wgt")),
    ("dma_read.acc", _dma_read("acc")),
    ("dma_read.uop", _dma_read("uop")),
    ("burst_splitter", _burst_splitter),
    ("read_arbiter", _read_arbiter),
    ("fetch", _fetch),
    ("load", _load),
    ("load.mem", _load_mem),
    ("token_queue", _token_queue),
    ("host_regs", _host_regs),
    ("axi_ram", _axi_ram),
    ("uart_soc", _uart_soc),
    ("compute", _compute),
    ("store", _store),
]


# --------------------------------------------------------------------------- flow
def _endpoint(seg: dict[str, Any], key: str) -> str:
    end = seg.get(key, {})
    return f"{end.get('cell', '?')}.{end.get('port', '?')}"


def measure(name: str, ctor: Constructor, cfg, bus_bytes: int, *, freq: float, seed: int,
            workdir: Path, effort: str = "timing") -> dict[str, Any]:
    """Synthesize and place-and-route one module; return its figures."""
    from amaranth.back import verilog
    from vta.boards.openflow import pnr_options
    from vta.boards.registry import get_board
    from vta.boards.synth import keep_replicas
    from vta.boards.tools import run_tool

    board = get_board(BOARD)
    workdir.mkdir(parents=True, exist_ok=True)
    top = wrap(ctor(cfg, bus_bytes))
    t0 = time.monotonic()
    (workdir / "top.v").write_text(verilog.convert(top, name="top", ports=top.ports,
                                                   emit_src=False))
    t_gen = time.monotonic() - t0
    t_syn = run_tool("yosys", ["-q", "-l", "yosys.log", "-p",
                               "read_verilog top.v; hierarchy -top top; proc; "
                               f"{keep_replicas()}; synth_ecp5 -abc9 -top top; "
                               "write_json top.json"],
                     cwd=workdir, log=workdir / "yosys.out", what=f"yosys ({name})")
    t_pnr = run_tool("nextpnr-ecp5",
                     [board.extra["nextpnr_device"], "--package", board.extra["package"],
                      "--speed", board.extra["speed"], "--json", "top.json",
                      "--out-of-context", "--freq", f"{freq:g}", "--report", "report.json",
                      "--seed", str(seed), *pnr_options(effort), "--timing-allow-fail"],
                     cwd=workdir, log=workdir / "nextpnr.log", what=f"nextpnr-ecp5 ({name})")
    rep = json.loads((workdir / "report.json").read_text())
    fmax = min((float(v["achieved"]) for v in rep.get("fmax", {}).values()), default=0.0)
    util = rep.get("utilization", {})
    path = ""
    for cp in rep.get("critical_paths", []):
        if cp.get("from", "").startswith("posedge") and cp.get("to", "").startswith("posedge"):
            segs = cp.get("path", [])
            if segs:
                logic = sum(1 for s in segs if s.get("type") == "logic")
                path = (f"{_endpoint(segs[0], 'from')} -> {_endpoint(segs[-1], 'to')} "
                        f"({logic} logic, {sum(float(s.get('delay', 0)) for s in segs):.2f} ns)")
            break
    return {
        "module": name, "fmax_mhz": round(fmax, 2), "target_mhz": freq,
        "meets_goal": fmax >= GOAL_MHZ,
        "lut4": util.get("TRELLIS_COMB", {}).get("used", 0),
        "ff": util.get("TRELLIS_FF", {}).get("used", 0),
        "ebr": util.get("DP16KD", {}).get("used", 0),
        "dsp": util.get("MULT18X18D", {}).get("used", 0),
        "critical_path": path,
        "seconds": {"generate": round(t_gen, 1), "synthesis": round(t_syn, 1),
                    "place_and_route": round(t_pnr, 1)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="measure only these modules (prefixes match, e.g. dma_read)")
    ap.add_argument("--freq", type=float, default=110.0, help="nextpnr target clock (MHz)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--effort", choices=("timing", "fast"), default="timing",
                    help="nextpnr options, as for 'vta build --effort' (default: timing)")
    ap.add_argument("--keep", metavar="DIR", help="keep the work files under DIR/<module>")
    ap.add_argument("--list", action="store_true", help="list the modules and exit")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--preset", metavar="NAME", help="a built-in config instead of the board's")
    g.add_argument("--config", metavar="FILE", help="a vta_config.json instead of the board's")
    ap.add_argument("--core-options", metavar="NAMES",
                    help="comma-separated core options to enable instead of the board's "
                         "(vta.hw.options.CoreOptions; '' for the plain core)")
    args = ap.parse_args()
    global _OPTIONS
    if args.core_options is not None:
        from vta.hw.options import CoreOptions
        from vta.isa.errors import ConfigError

        try:
            _OPTIONS = CoreOptions.from_names(args.core_options).as_dict()
        except ConfigError as e:
            ap.error(str(e))

    from vta.boards.registry import get_board

    board = get_board(BOARD)
    cfg, bus_bytes = board.default_config, board.bus_width // 8
    if args.preset or args.config:
        from vta.cli.common import config_from_args
        from vta.isa import VTAError

        try:
            cfg = config_from_args(args)
        except VTAError as e:
            ap.error(str(e))
    todo = [(n, c) for n, c in MODULES
            if not args.only or any(n == o or n.startswith(o) for o in args.only)]
    if args.list or not todo:
        for n, _ in MODULES:
            print(n)
        return 0 if todo or args.list else 2
    print(f"{board.title} ({board.part}), config {cfg.batch}x{cfg.block_in}x{cfg.block_out}, "
          f"{board.bus_width}-bit bus; out of context, ports registered; nextpnr target "
          f"{args.freq:g} MHz, goal {GOAL_MHZ:g} MHz; core options {_core_options() or 'none'}",
          flush=True)
    print(f"{'module':<16} {'LUT4':>6} {'FF':>6} {'EBR':>4} {'DSP':>4} {'Fmax MHz':>9} "
          f"{'/goal':>6}  {'time s':>6}  critical path", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="vta-fmax-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        for name, ctor in todo:
            r = measure(name, ctor, cfg, bus_bytes, freq=args.freq, seed=args.seed,
                        effort=args.effort, workdir=root / name)
            results.append(r)
            secs = sum(r["seconds"].values())
            mark = "" if r["meets_goal"] else "  << below goal"
            print(f"{name:<16} {r['lut4']:>6} {r['ff']:>6} {r['ebr']:>4} {r['dsp']:>4} "
                  f"{r['fmax_mhz']:>9.1f} {r['fmax_mhz'] / GOAL_MHZ:>6.2f}  {secs:>6.0f}  "
                  f"{r['critical_path']}{mark}", flush=True)
    worst = min(results, key=lambda r: r["fmax_mhz"])
    print(f"slowest: {worst['module']} at {worst['fmax_mhz']:.1f} MHz "
          f"({worst['fmax_mhz'] / GOAL_MHZ:.2f}x the {GOAL_MHZ:g} MHz goal)")
    write_record("bench_rtl_fmax", {"board": board.name, "freq_mhz": args.freq,
                                    "modules": results, "slowest_mhz": worst["fmax_mhz"]},
                 {"goal_mhz": GOAL_MHZ}, params=vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
