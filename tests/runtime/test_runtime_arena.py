"""The DRAM arena: aligned allocation, coalescing free, out-of-memory report, copies."""

from __future__ import annotations

import numpy as np
import pytest
import vta.runtime as rt
from vta.isa import Config, MemType

pytestmark = pytest.mark.unit


def test_alignment_is_per_element_size_on_the_physical_address(cfg: Config) -> None:
    arena = rt.Arena(cfg, 1 << 16, base=0x1010)  # a base that is not 256-aligned
    a = arena.alloc(3)                           # default 64-byte alignment
    w = arena.alloc(1000, mem_type="wgt")        # 256-byte weight elements
    i = arena.alloc(5, mem_type=MemType.INP)
    assert a.addr % 64 == 0 and w.addr % 256 == 0 and i.addr % cfg.inp_elem_bytes == 0
    assert w.elem_addr("wgt") == w.addr // 256
    assert w.elem_addr("wgt", 3) == w.addr // 256 + 3
    assert arena.contains(w.addr, w.nbytes) and not arena.contains(w.addr, 1 << 16)
    with pytest.raises(rt.ArenaError, match="not aligned to the WGT element size"):
        a.elem_addr("wgt")


def test_free_coalesces_neighbours(cfg: Config) -> None:
    arena = rt.Arena(cfg, 4096)
    bufs = [arena.alloc(1024, align=16) for _ in range(4)]
    assert arena.free_bytes == 0
    bufs[1].free()
    bufs[2].free()
    assert arena.free_blocks == [(1024, 2048)]
    bufs[0].free()
    assert arena.free_blocks == [(0, 3072)]
    big = arena.alloc(3072, align=16)            # fits only because the blocks merged
    assert big.offset == 0
    big.free()
    bufs[3].free()
    assert arena.free_blocks == [(0, 4096)] and arena.used_bytes == 0
    with pytest.raises(rt.ArenaError, match="double free"):
        bufs[3].free()


def test_out_of_memory_says_asked_left_and_largest(cfg: Config) -> None:
    arena = rt.Arena(cfg, 4096)
    a = arena.alloc(1024, align=16)
    arena.alloc(1024, align=16)
    a.free()                                     # 1024 free at 0, 2048 free at 2048
    with pytest.raises(rt.OutOfMemoryError) as e:
        arena.alloc(2500, align=16)
    msg = str(e.value)
    assert "asked for 2500 B" in msg and "3072 B" in msg and "largest free block 2048 B" in msg
    assert isinstance(e.value, rt.RuntimeVTAError)


def test_host_device_copies(cfg: Config) -> None:
    arena = rt.Arena(cfg, 1 << 12)
    x = np.arange(-8, 8, dtype=np.int32).reshape(4, 4)
    buf = arena.alloc(x.nbytes, mem_type="acc")
    buf.copyfrom(x)
    np.testing.assert_array_equal(buf.numpy(np.int32, (4, 4)), x)
    assert bytes(arena.memory[buf.offset:buf.offset + 4]) == (-8).to_bytes(4, "little",
                                                                            signed=True)
    got = buf.numpy(np.int32)
    got[0] = 99                                  # a copy, not a view
    assert buf.numpy(np.int32)[0] == -8
    with pytest.raises(rt.ArenaError, match="does not fit"):
        buf.copyfrom(np.zeros(65, np.uint8))
    with pytest.raises(rt.ArenaError, match="overruns"):
        buf.numpy(np.int32, (5, 4))
    buf.free()
    with pytest.raises(rt.ArenaError, match="already freed"):
        buf.numpy()


def test_bad_allocations(cfg: Config) -> None:
    arena = rt.Arena(cfg, 4096)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(rt.ArenaError, match="positive number of bytes"):
            arena.alloc(bad)
    with pytest.raises(rt.ArenaError, match="power of two"):
        arena.alloc(16, align=3)
    with pytest.raises(rt.ArenaError, match="unknown memory type"):
        arena.alloc(16, mem_type="bias")
    with pytest.raises(rt.ArenaError, match="multiple of 16"):
        rt.Arena(cfg, 4096, base=8)


def test_alloc_at_a_planned_offset(cfg: Config) -> None:
    arena = rt.Arena(cfg, 4096)
    b = arena.alloc_at(1024, 512)
    assert (b.offset, b.nbytes) == (1024, 512)
    assert arena.free_blocks == [(0, 1024), (1536, 2560)]
    with pytest.raises(rt.ArenaError, match="in use"):
        arena.alloc_at(1500, 100)
    with pytest.raises(rt.ArenaError, match="outside"):
        arena.alloc_at(4000, 200)
    assert arena.alloc(1024, align=16).offset == 0   # first fit still uses the hole before it
