"""vta.sim: simulators that need no hardware description.

- :mod:`vta.sim.fsim`: the functional simulator, the kit's golden model (docs/fsim.md), with
  :mod:`vta.sim.loops` (index analysis of GEMM/ALU loop nests) and :mod:`vta.sim.blas` (BLAS
  thread control);
- :mod:`vta.sim.perf`: the cycle-approximate performance model.

Submodules are imported on demand (``from vta.sim import fsim``).
"""
