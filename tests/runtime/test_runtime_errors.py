"""Bad arguments are rejected with clear VTAErrors: sizes, scopes, SRAM indices, addresses,
devices."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config, VTAError

pytestmark = pytest.mark.unit


@pytest.fixture
def q(small_cfg: Config) -> rt.CommandQueue:
    return rt.CommandQueue.recorder(small_cfg, rt.Arena(small_cfg, 1 << 14))


def _load(q: rt.CommandQueue, buf, off=0, x=1, y=1, stride=1, sram=0, mt="inp", **pads):
    q.load_buffer_2d(buf, off, x, y, stride, dst_sram_index=sram, dst_memory_type=mt, **pads)


def test_load_argument_checks(q: rt.CommandQueue) -> None:
    cfg = q.cfg
    buf = q.arena.alloc(64 * cfg.inp_elem_bytes, mem_type="inp")   # 64 input elements
    cases = [
        (dict(x=0), "x_size=0 must be in 1..65535"),
        (dict(y=0), "y_size=0 must be in 1..65535"),
        (dict(x=4, stride=3), "x_stride=3 must be in x_size..65535"),
        (dict(x_pad_before=16), "x_pad_before=16 must be in 0..15"),
        (dict(mt="out"), "cannot load OUT"),
        (dict(mt="uop"), "cannot load UOP"),
        (dict(mt="bias"), "unknown memory type 'bias'"),
        (dict(sram=cfg.inp_depth - 1, x=2, stride=2),
         f"SRAM entries \\[{cfg.inp_depth - 1}, {cfg.inp_depth + 1}\\) are beyond the INP"),
        (dict(x=2, y=2, stride=2, y_pad_before=1, sram=cfg.inp_depth - 5),
         "beyond the INP buffer"),
        (dict(off=60, x=5, stride=5), "accesses INP elements \\[60, 65\\) of a buffer that "
                                      "holds 64"),
        (dict(off=-1), "accesses INP elements \\[-1"),
        (dict(x=1.0), "x_size must be an integer"),
    ]
    for kw, msg in cases:
        with pytest.raises(rt.QueueError, match=msg):
            _load(q, buf, **kw)
    with pytest.raises(rt.QueueError, match="needs dst_sram_index and dst_memory_type"):
        q.load_buffer_2d(buf, 0, 1, 1, 1)
    assert q.pending == 0  # nothing was emitted by the rejected calls


def test_addresses_outside_the_arena_or_misaligned(q: rt.CommandQueue, small_cfg: Config) -> None:
    other = rt.Arena(small_cfg, 1 << 12)
    foreign = other.alloc(64, mem_type="inp")
    with pytest.raises(rt.QueueError, match="belongs to another arena"):
        _load(q, foreign)
    with pytest.raises(rt.QueueError, match="must be a DeviceBuffer"):
        _load(q, 1234)
    q.arena.alloc(4, align=4)
    odd = q.arena.alloc(64, align=4)  # at byte 4: fine for INP (4 B), not for WGT (16 B)
    assert odd.addr == 4
    _load(q, odd)
    with pytest.raises(rt.QueueError, match="not aligned to the WGT element size \\(16 B\\)"):
        _load(q, odd, mt="wgt")
    freed = q.arena.alloc(64, mem_type="inp")
    freed.free()
    with pytest.raises(rt.QueueError, match="was freed"):
        _load(q, freed)


def test_store_argument_checks(q: rt.CommandQueue) -> None:
    cfg = q.cfg
    out = q.arena.alloc(8 * cfg.out_elem_bytes, mem_type="out")
    with pytest.raises(rt.QueueError, match="stores from 'out'"):
        q.store_buffer_2d(0, "acc", out, 0, 1, 1, 1)
    with pytest.raises(rt.QueueError, match="beyond the OUT buffer"):
        q.store_buffer_2d(cfg.acc_depth - 1, "out", out, 0, 2, 1, 2)
    with pytest.raises(rt.QueueError, match="accesses OUT elements \\[0, 9\\)"):
        q.store_buffer_2d(0, "out", out, 0, 3, 3, 3)
    q.store_buffer_2d(0, "out", out, 0, 2, 4, 2)  # exactly fits
    assert q.pending == 1


def test_kernel_mode_and_config_mismatch(q: rt.CommandQueue, cfg: Config) -> None:
    k = q.kernel()
    k.push("alu", False, 0, 0)
    with pytest.raises(rt.QueueError, match="push_gemm: the kernel's micro-ops are alu ops"):
        q.push_gemm(k)
    with pytest.raises(rt.QueueError, match="takes a UopKernel"):
        q.push_alu([(0, 0, 0)])
    other = rt.UopKernel(cfg)
    other.push("gemm", False, 0, 0, 0)
    with pytest.raises(rt.QueueError, match="another configuration"):
        q.push_gemm(other)


def test_queue_mode_errors(q: rt.CommandQueue, small_cfg: Config) -> None:
    with pytest.raises(rt.QueueError, match="call record\\(\\) instead"):
        q.synchronize()
    dev = rt.open("fsim", small_cfg, arena_size=1 << 12)
    with pytest.raises(rt.QueueError, match="record\\(\\) needs a recording queue"):
        dev.command_queue().record()
    with pytest.raises(rt.QueueError, match="hazards must be"):
        dev.command_queue(hazards="ignore")
    with pytest.raises(rt.QueueError, match="max_insns=4 is too small"):
        dev.command_queue(max_insns=4)


def test_open_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(rt.DeviceUnavailableError, match="unknown device 'gpu'"):
        rt.open("gpu")
    monkeypatch.setitem(sys.modules, "vta.hw.tsim", None)     # module missing
    monkeypatch.setitem(sys.modules, "vta.hw.simulate", None)
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/" + name)
    for target in ("rtl", "tsim"):
        with pytest.raises(rt.DeviceUnavailableError, match=f"the {target} device is not "
                                                            f"available"):
            rt.open(target)
    monkeypatch.setenv("VTA_VERILATOR", "/nonexistent/verilator")  # tool missing
    with pytest.raises(rt.DeviceUnavailableError, match="needs verilator"):
        rt.open("tsim")
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(rt.DeviceUnavailableError, match="needs the pynq package"):
        rt.open("pynq", bitstream="vta.bit")
    with pytest.raises(VTAError, match="unknown preset 'tiny'"):
        rt.open("fsim", "tiny")
    with pytest.raises(rt.DeviceError, match="bad option for the fsim device"):
        rt.open("fsim", arena_size=4096, flavour="x")


def test_device_run_checks_programs(small_cfg: Config) -> None:
    dev = rt.open("fsim", small_cfg, arena_size=1 << 12)
    with pytest.raises(VTAError, match="does not end with FINISH"):
        dev.run(np.zeros(16, np.uint8).tobytes())
    dev.close()
    with pytest.raises(rt.DeviceError, match="closed"):
        dev.run(b"\x03" + bytes(15))
