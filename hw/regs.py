"""The host register map of the VTA core (AXI4-Lite slave, 32-bit registers).

This module is pure Python (no Amaranth) so harnesses, drivers and documentation can import it
cheaply. :data:`REGISTER_MAP` maps a register name to its byte offset; :data:`REGISTERS` gives
the access mode and a one-line description of each. ``hw/README.md`` shows the same table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The value of the read-only ID register: "VTA" and the register-map revision (1).
CORE_ID = 0x56544101


@dataclass(frozen=True)
class Register:
    """One 32-bit host register."""

    name: str
    offset: int
    access: str  # "rw", "ro" or "w1" (write 1 to act)
    doc: str


REGISTERS: tuple[Register, ...] = (
    Register("control", 0x00, "rw",
             "bit 0 launch (write 1 to start; reads 1 while running); bit 1 finished (reads 1 "
             "after FINISH executed and every module drained; cleared by the next launch); "
             "bit 2 AXI error (an error response stopped the core: see axi_error)"),
    Register("cycles", 0x04, "ro", "cycles since launch, stops counting at finish"),
    Register("insn_count", 0x08, "rw", "number of instructions to fetch"),
    Register("insn_addr", 0x0C, "rw", "byte address of the instruction stream (16-byte aligned)"),
    Register("id", 0x10, "ro", f"core ID 0x{CORE_ID:08X} ('VTA', register-map revision 1)"),
    Register("hw_config", 0x14, "ro",
             "bits [3:0] LOG_INP_WIDTH, [7:4] LOG_WGT_WIDTH, [11:8] LOG_ACC_WIDTH, "
             "[15:12] LOG_BATCH, [19:16] LOG_BLOCK, [27:20] bus width in bytes"),
    Register("status", 0x18, "ro",
             "bit 0 fetch busy, 1 load busy, 2 compute busy, 3 store busy, 4 running, "
             "5 finished, 6 FINISH executed, 7 AXI error"),
    Register("fetched", 0x1C, "ro", "instructions fetched from memory since launch"),
    Register("load_done", 0x20, "ro", "instructions completed by load since launch"),
    Register("compute_done", 0x24, "ro", "instructions completed by compute since launch"),
    Register("store_done", 0x28, "ro", "instructions completed by store since launch"),
    Register("load_busy", 0x2C, "ro", "cycles load was executing an instruction"),
    Register("compute_busy", 0x30, "ro", "cycles compute was executing an instruction"),
    Register("store_busy", 0x34, "ro", "cycles store was executing an instruction"),
    Register("load_token_wait", 0x38, "ro", "cycles load waited for a dependency token"),
    Register("compute_token_wait", 0x3C, "ro", "cycles compute waited for a dependency token"),
    Register("store_token_wait", 0x40, "ro", "cycles store waited for a dependency token"),
    Register("load_mem_wait", 0x44, "ro", "cycles load waited for memory (read data)"),
    Register("compute_mem_wait", 0x48, "ro", "cycles compute waited for memory (read data)"),
    Register("store_mem_wait", 0x4C, "ro", "cycles store waited for memory (write ready/resp)"),
    Register("gemm_uops", 0x50, "ro", "GEMM micro-op iterations executed"),
    Register("alu_uops", 0x54, "ro", "ALU micro-op iterations executed"),
    Register("tokens_l2c", 0x58, "ro", "tokens in the load->compute queue"),
    Register("tokens_c2l", 0x5C, "ro", "tokens in the compute->load queue"),
    Register("tokens_c2s", 0x60, "ro", "tokens in the compute->store queue"),
    Register("tokens_s2c", 0x64, "ro", "tokens in the store->compute queue"),
    Register("queue_load", 0x68, "ro", "instructions waiting in the load instruction queue"),
    Register("queue_compute", 0x6C, "ro", "instructions waiting in the compute instruction queue"),
    Register("queue_store", 0x70, "ro", "instructions waiting in the store instruction queue"),
    Register("states", 0x74, "ro",
             "current state: bits [3:0] fetch, [7:4] load, [11:8] compute, [15:12] store "
             "(0 = idle; see hw/README.md)"),
    Register("bytes_read", 0x78, "ro", "bytes moved by AXI read bursts since launch"),
    Register("bytes_written", 0x7C, "ro", "bytes moved by AXI write beats (strobed) since launch"),
    Register("axi_error", 0x80, "ro",
             "bit 0 an AXI error response (SLVERR or DECERR) was received: the core stopped (no "
             "new read burst, running drops, interrupt rises, launch is ignored) until reset; "
             "bit 1 it answered a write (0: a read); bits [3:2] the response (2 SLVERR, 3 DECERR)"),
    Register("axi_error_addr", 0x84, "ro",
             "start byte address of the burst that got the error response"),
)

#: The instance name of the core in every generated board project (the Vivado block-design cell,
#: the Platform Designer instance). PYNQ's ``Overlay.ip_dict`` lists the core under this name, so
#: the board projects and the PYNQ runtime take it from here.
CELL_NAME = "vta"

#: Register name -> byte offset.
REGISTER_MAP: dict[str, int] = {r.name: r.offset for r in REGISTERS}

#: Control register bits.
CONTROL_LAUNCH = 1 << 0
CONTROL_FINISHED = 1 << 1
CONTROL_ERROR = 1 << 2

#: AXI response codes latched by the ``axi_error`` register.
AXI_RESPONSES = {0: "OKAY", 1: "EXOKAY", 2: "SLVERR", 3: "DECERR"}

#: Module state codes shown in the ``states`` register.
MODULE_STATES: dict[str, int] = {
    "idle": 0, "decode": 1, "pop_tokens": 2, "run": 3, "drain": 4, "push_tokens": 5,
}
FETCH_STATES: dict[str, int] = {"idle": 0, "request": 1, "data": 2, "drain": 3}


def describe() -> list[dict[str, object]]:
    """The register map as JSON-friendly dicts (used by ``vta verilog``)."""
    return [{"name": r.name, "offset": r.offset, "access": r.access, "doc": r.doc}
            for r in REGISTERS]


__all__ = ["REGISTERS", "REGISTER_MAP", "Register", "CORE_ID", "CONTROL_LAUNCH",
           "CONTROL_FINISHED", "CONTROL_ERROR", "AXI_RESPONSES", "CELL_NAME", "MODULE_STATES",
           "FETCH_STATES", "describe"]
