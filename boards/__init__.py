"""vta.boards: FPGA board definitions, Verilog and vendor project emission, open-flow synthesis,
place-and-route and resource/timing reports.

- :mod:`vta.boards.registry`: the declarative board table (:func:`get_board`, :func:`all_boards`).
- :mod:`vta.boards.project`: ``write_project(board, cfg, out_dir)``, the core Verilog plus the
  board's top wrapper (:mod:`~vta.boards.wrapper`) and the vendor project scripts
  (:mod:`~vta.boards.vivado`, :mod:`~vta.boards.quartus`, :mod:`~vta.boards.openflow`).
- :mod:`vta.boards.synth`: yosys synthesis and the resource report against the board's budget.
- :mod:`vta.boards.openflow`: the ECP5 flow (yosys, nextpnr-ecp5, ecppack) to a bitstream and
  its Fmax; :mod:`vta.boards.ulx3s` is the ULX3S top (PLL, serial bridge, device memory).
- :mod:`vta.boards.lint`: Verilator lint of an emitted project.
"""

from .registry import (
    DEFAULT_BOARD,
    FAMILIES,
    Board,
    BoardError,
    Family,
    Resources,
    all_boards,
    board_names,
    get_board,
    get_family,
)

__all__ = ["DEFAULT_BOARD", "FAMILIES", "Board", "BoardError", "Family", "Resources", "all_boards",
           "board_names", "get_board", "get_family"]
