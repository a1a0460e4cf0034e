"""The DRAM arena: one contiguous block of device memory and a first-fit allocator over it.

Device memory is a numpy ``uint8`` array (for simulators, the DRAM image itself; on a board, the
host view of a physically contiguous buffer). The arena starts at physical byte address ``base``.
Instructions address DRAM in ELEMENTS of a memory type: a buffer used as, say, weights must start
at a byte address that is a multiple of the weight element size, which is why allocations are
aligned per element size (``mem_type=``) or explicitly (``align=``).

>>> from vta.isa import Config, MemType
>>> arena = Arena(Config(), 1 << 16)
>>> a = arena.alloc(1024, mem_type=MemType.WGT)
>>> a.elem_addr(MemType.WGT) * 256 == a.addr
True
>>> a.free()
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

import numpy as np
from vta.isa import Config, MemType

from .errors import ArenaError, OutOfMemoryError

_MEM_NAMES = {"uop": MemType.UOP, "wgt": MemType.WGT, "inp": MemType.INP, "acc": MemType.ACC,
              "out": MemType.OUT}


def as_mem_type(value: MemType | int | str) -> MemType:
    """A memory type from a MemType, its value or its name ("inp", "wgt", "acc", "uop", "out")."""
    if isinstance(value, str):
        try:
            return _MEM_NAMES[value.lower()]
        except KeyError:
            raise ArenaError(f"unknown memory type {value!r}; use one of "
                             f"{', '.join(_MEM_NAMES)}") from None
    try:
        return MemType(int(value))
    except (ValueError, TypeError):
        raise ArenaError(f"unknown memory type {value!r}; use one of "
                         f"{', '.join(_MEM_NAMES)}") from None


def _fmt(n: int) -> str:
    """Bytes in a readable unit, exact below 1 KiB."""
    if n < 1024:
        return f"{n} B"
    if n < 1 << 20:
        return f"{n} B ({n / 1024:.1f} KiB)"
    return f"{n} B ({n / (1 << 20):.1f} MiB)"


class DeviceBuffer:
    """A block of the arena: ``nbytes`` bytes at physical byte address :attr:`addr`.

    Host<->device copies go through :meth:`copyfrom` and :meth:`numpy` (the device memory of a
    simulator is host memory; on a board the device flushes/invalidates caches around runs).
    """

    __slots__ = ("arena", "offset", "nbytes", "align", "_freed")

    def __init__(self, arena: Arena, offset: int, nbytes: int, align: int) -> None:
        self.arena = arena
        self.offset = offset  #: byte offset from the arena's start
        self.nbytes = nbytes
        self.align = align
        self._freed = False

    @property
    def addr(self) -> int:
        """Physical byte address of the first byte."""
        return self.arena.base + self.offset

    @property
    def freed(self) -> bool:
        return self._freed

    def elem_addr(self, mem_type: MemType | int | str, elem_offset: int = 0) -> int:
        """The address in elements of ``mem_type`` (what LOAD/STORE take as ``dram_base``)."""
        mt = as_mem_type(mem_type)
        eb = self.arena.cfg.elem_bytes(mt)
        self._check_live()
        if self.addr % eb:
            raise ArenaError(
                f"buffer at byte address 0x{self.addr:x} is not aligned to the {mt.name} element "
                f"size ({eb} B); allocate it with mem_type={mt.name.lower()!r} or align={eb}")
        return self.addr // eb + elem_offset

    def elems(self, mem_type: MemType | int | str) -> int:
        """How many whole elements of ``mem_type`` the buffer holds."""
        return self.nbytes // self.arena.cfg.elem_bytes(as_mem_type(mem_type))

    def view(self) -> np.ndarray:
        """The buffer's bytes as a writable uint8 view of the arena memory (no copy)."""
        self._check_live()
        return self.arena.memory[self.offset:self.offset + self.nbytes]

    def copyfrom(self, data: np.ndarray | bytes, offset: int = 0) -> DeviceBuffer:
        """Host -> device: copy the bytes of ``data`` (any dtype, C order) to ``offset``."""
        self._check_live()
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1) \
            if isinstance(data, np.ndarray) else np.frombuffer(bytes(data), dtype=np.uint8)
        if offset < 0 or offset + raw.size > self.nbytes:
            raise ArenaError(
                f"copy of {raw.size} B at offset {offset} does not fit the {self.nbytes} B buffer")
        self.arena.memory[self.offset + offset:self.offset + offset + raw.size] = raw
        return self

    def numpy(self, dtype: Any = np.uint8, shape: tuple[int, ...] | None = None,
              offset: int = 0) -> np.ndarray:
        """Device -> host: a copy of the buffer (or of ``shape`` items from ``offset``)."""
        self._check_live()
        dt = np.dtype(dtype)
        count = (self.nbytes - offset) // dt.itemsize if shape is None else int(np.prod(shape))
        nbytes = count * dt.itemsize
        if offset < 0 or offset + nbytes > self.nbytes:
            raise ArenaError(
                f"reading {nbytes} B at offset {offset} overruns the {self.nbytes} B buffer")
        raw = self.arena.memory[self.offset + offset:self.offset + offset + nbytes]
        out = raw.copy().view(dt)
        return out if shape is None else out.reshape(shape)

    def free(self) -> None:
        """Return the block to the arena (a second free is an error)."""
        self.arena.free(self)

    def _check_live(self) -> None:
        if self._freed:
            raise ArenaError(f"buffer at 0x{self.addr:x} ({self.nbytes} B) was already freed")

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return f"<DeviceBuffer 0x{self.addr:x} {self.nbytes} B{state}>"


class Arena:
    """One contiguous device memory with an aligned first-fit allocator and coalescing free.

    ``memory`` is the uint8 host view (allocated here unless ``memory`` is given, e.g. a PYNQ
    contiguous buffer); ``base`` is the physical byte address of ``memory[0]``.
    """

    def __init__(self, cfg: Config, size: int, *, base: int = 0,
                 memory: np.ndarray | None = None,
                 on_free: Callable[[DeviceBuffer], None] | None = None) -> None:
        if size <= 0:
            raise ArenaError(f"arena size must be positive, not {size}")
        if base < 0 or base % 16:
            raise ArenaError(f"arena base 0x{base:x} must be a non-negative multiple of 16")
        self.cfg = cfg
        self.base = base
        self.size = size
        if memory is None:
            memory = np.zeros(size, dtype=np.uint8)
        elif memory.dtype != np.uint8 or memory.size < size:
            raise ArenaError(f"arena memory must be a uint8 array of at least {size} B")
        self.memory = memory.reshape(-1)[:size]
        self._free: list[list[int]] = [[0, size]]  # sorted [offset, length] blocks
        self._live: dict[int, DeviceBuffer] = {}
        self._on_free = on_free

    # ----------------------------------------------------------------- allocation
    def alloc(self, nbytes: int, *, mem_type: MemType | int | str | None = None,
              align: int | None = None) -> DeviceBuffer:
        """Allocate ``nbytes`` aligned to the element size of ``mem_type`` (or to ``align``;
        default 64 B, a multiple of every element size up to 64 B)."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer) or nbytes <= 0:
            raise ArenaError(f"allocation size must be a positive number of bytes, not {nbytes!r}")
        nbytes = int(nbytes)
        if align is None:
            align = self.cfg.elem_bytes(as_mem_type(mem_type)) if mem_type is not None else 64
        if align <= 0 or align & (align - 1):
            raise ArenaError(f"alignment must be a power of two, not {align}")
        for i, (off, length) in enumerate(self._free):
            start = off + (-(self.base + off)) % align
            if start + nbytes <= off + length:
                self._take(i, start, nbytes)
                buf = DeviceBuffer(self, start, nbytes, align)
                self._live[start] = buf
                return buf
        raise OutOfMemoryError(
            f"out of device memory: asked for {_fmt(nbytes)} aligned to {align} B, "
            f"{_fmt(self.free_bytes)} free of {_fmt(self.size)} (largest free block "
            f"{_fmt(self.largest_free)}); free buffers or open the device with a larger "
            f"arena_size")

    def alloc_at(self, offset: int, nbytes: int) -> DeviceBuffer:
        """Allocate exactly bytes [offset, offset + nbytes) of the arena (for a static memory
        plan, e.g. an ahead-of-time module's tensors); the range must be free."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, int | np.integer) or nbytes <= 0:
            raise ArenaError(f"allocation size must be a positive number of bytes, not {nbytes!r}")
        if not 0 <= offset <= self.size - nbytes:
            raise ArenaError(f"bytes [{offset}, {offset + nbytes}) are outside the "
                             f"{self.size} B arena")
        for i, (off, length) in enumerate(self._free):
            if off <= offset and offset + nbytes <= off + length:
                self._take(i, offset, int(nbytes))
                buf = DeviceBuffer(self, offset, int(nbytes), 1)
                self._live[offset] = buf
                return buf
        raise ArenaError(f"bytes [{offset}, {offset + nbytes}) of the arena are (partly) in use")

    def _take(self, i: int, start: int, nbytes: int) -> None:
        off, length = self._free[i]
        pieces = []
        if start > off:
            pieces.append([off, start - off])
        end = start + nbytes
        if end < off + length:
            pieces.append([end, off + length - end])
        self._free[i:i + 1] = pieces

    def free(self, buf: DeviceBuffer) -> None:
        """Free a buffer; neighbouring free blocks are merged."""
        if buf.arena is not self:
            raise ArenaError(f"{buf!r} belongs to another arena")
        if buf._freed or self._live.get(buf.offset) is not buf:
            raise ArenaError(f"double free of buffer at 0x{buf.addr:x} ({buf.nbytes} B)")
        if self._on_free is not None:
            self._on_free(buf)
        del self._live[buf.offset]
        buf._freed = True
        blocks = self._free
        i = bisect.bisect_left(blocks, [buf.offset, 0])
        blocks.insert(i, [buf.offset, buf.nbytes])
        if i + 1 < len(blocks) and blocks[i][0] + blocks[i][1] == blocks[i + 1][0]:
            blocks[i][1] += blocks[i + 1][1]
            del blocks[i + 1]
        if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == blocks[i][0]:
            blocks[i - 1][1] += blocks[i][1]
            del blocks[i]

    def reset(self) -> None:
        """Free every buffer at once."""
        for buf in list(self._live.values()):
            self.free(buf)

    # ----------------------------------------------------------------- queries
    @property
    def free_bytes(self) -> int:
        return sum(length for _, length in self._free)

    @property
    def used_bytes(self) -> int:
        return self.size - self.free_bytes

    @property
    def largest_free(self) -> int:
        return max((length for _, length in self._free), default=0)

    @property
    def free_blocks(self) -> list[tuple[int, int]]:
        """(offset, length) of each free block, by offset."""
        return [(o, n) for o, n in self._free]

    @property
    def buffers(self) -> list[DeviceBuffer]:
        return [self._live[k] for k in sorted(self._live)]

    def contains(self, addr: int, nbytes: int) -> bool:
        """Whether physical bytes [addr, addr + nbytes) lie inside the arena."""
        return self.base <= addr and addr + nbytes <= self.base + self.size

    def __repr__(self) -> str:
        return (f"<Arena base=0x{self.base:x} size={self.size} used={self.used_bytes} "
                f"buffers={len(self._live)}>")


__all__ = ["Arena", "DeviceBuffer", "as_mem_type"]
