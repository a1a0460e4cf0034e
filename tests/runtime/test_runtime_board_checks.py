"""Board devices (PYNQ, DE10-Nano, ULX3S, and so the virtual boards, which drive these) run the
static program checks every simulator runs before a program reaches the board: a DRAM range
outside the device's arena is the ProgramError fsim gives, and the board is never launched.

References: fsim's own error for the same program and arena (word for word up to the bound it
names), the board models' launch counters, hand-computed arena bounds.
"""

from __future__ import annotations

import pytest
import vta.runtime as rt
from vta.isa import Config, FinishInsn, MemInsn, encode_program
from vta.isa.errors import ProgramError
from vta.isa.layout import MemType, Opcode
from vta.runtime.regmodel import SimulatedBoard

pytestmark = pytest.mark.sim

ARENA = 1 << 16


def _load_inp(cfg: Config, elem: int) -> bytes:
    return encode_program([
        MemInsn(opcode=Opcode.LOAD, memory_type=MemType.INP, dram_base=elem, y_size=1,
                x_size=1, x_stride=1, push_next_dep=1),
        FinishInsn(pop_prev_dep=1)], cfg)


def _store_out(cfg: Config, elem: int) -> bytes:
    return encode_program([
        MemInsn(opcode=Opcode.STORE, memory_type=MemType.OUT, dram_base=elem, y_size=1,
                x_size=1, x_stride=1), FinishInsn()], cfg)


def _cases(cfg: Config, base: int) -> dict[str, bytes]:
    """Programs one element past the arena's end and one element below its start."""
    ie, oe = cfg.inp_elem_bytes, cfg.out_elem_bytes
    return {"read-past-end": _load_inp(cfg, (base + ARENA) // ie),
            "store-past-end": _store_out(cfg, (base + ARENA) // oe),
            "read-below-start": _load_inp(cfg, base // ie - 1),
            "store-below-start": _store_out(cfg, base // oe - 1)}


def _open_pynq(cfg: Config, target: str) -> tuple[rt.Device, SimulatedBoard]:
    board = SimulatedBoard(cfg, mem_size=1 << 20)
    return rt.open(target, cfg, platform=board, arena_size=ARENA), board


@pytest.mark.parametrize("target", ["pynq", "de10-nano"])
@pytest.mark.parametrize("case", ["read-past-end", "store-past-end", "read-below-start",
                                  "store-below-start"])
@pytest.mark.parametrize("submit", ["run", "run_queued"])
def test_board_devices_reject_programs_outside_their_arena(target, case, submit, small_cfg):
    dev, board = _open_pynq(small_cfg, target)
    base = dev.arena.base
    assert base > 0 and base + ARENA < board.memory.size  # both sides are board memory
    program = _cases(small_cfg, base)[case]
    with pytest.raises(ProgramError) as e:
        getattr(dev, submit)(program)
    msg = str(e.value)
    assert msg.endswith(f"outside the device's DRAM arena {base:#x}..{base + ARENA - 1:#x}")
    assert "\n" not in msg and board.mmio.launches == 0  # the board never saw it
    if case.endswith("past-end"):  # fsim with the same arena says the same up to the bound
        ref = rt.open("fsim", small_cfg, arena_size=ARENA, arena_base=base)
        with ref, pytest.raises(ProgramError) as want:
            ref.run(program)
        head = str(want.value).split(" are beyond ")[0]
        assert msg.split(" are outside ")[0] == head
    # a program inside the arena still runs
    dev.run(_load_inp(small_cfg, base // small_cfg.inp_elem_bytes))
    assert board.mmio.launches == 1


def test_ulx3s_device_rejects_programs_outside_its_arena(small_cfg):
    """The ULX3S device (its serial bridge here a line that fails the test if written to)."""
    from vta.runtime.ulx3s import PAGE, Ulx3sDevice

    class Untouchable:
        def write(self, data: bytes) -> None:
            raise AssertionError("the program reached the board")

        def read(self, n: int) -> bytes:
            raise AssertionError("the program reached the board")

    class Platform:
        transport = Untouchable()
        ram_bytes = 1 << 18

    dev = Ulx3sDevice(small_cfg, arena_size=ARENA, platform=Platform(), probe=False)
    assert dev.arena.base == PAGE
    for program in _cases(small_cfg, PAGE).values():
        with pytest.raises(ProgramError, match=f"outside the device's DRAM arena "
                                               f"{PAGE:#x}..{PAGE + ARENA - 1:#x}"):
            dev.run(program)


def test_simulators_keep_the_whole_image_bound(small_cfg):
    """fsim's device is unchanged: its DRAM image starts at 0, below the arena included."""
    with rt.open("fsim", small_cfg, arena_size=ARENA, arena_base=4096) as dev:
        dev.run(_load_inp(small_cfg, 0))
        with pytest.raises(ProgramError, match=f"beyond the {4096 + ARENA}-byte DRAM image"):
            dev.run(_load_inp(small_cfg, (4096 + ARENA) // small_cfg.inp_elem_bytes))
