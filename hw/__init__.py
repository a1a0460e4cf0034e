"""vta.hw: the VTA core in Amaranth 0.5 (see hw/README.md).

``vta.hw.core.VTACore`` is the core, ``vta.hw.verilog.generate`` its Verilog, ``vta.hw.regs`` the
host register map (pure Python). Importing this package does not import Amaranth.
"""
