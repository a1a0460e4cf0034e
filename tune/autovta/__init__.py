"""AutoVTA: search the accelerator's own parameters under an FPGA board's resource budget.

- :mod:`.space`: the hardware knobs (GEMM shape, buffer sizes, bus width), valid combinations only;
- :mod:`.resources`: the analytic resource model (BRAM/DSP from structure, LUT/FF fitted);
- :mod:`.synthcache`, :mod:`.calibration`: cached yosys synthesis and model calibration;
- :mod:`.network`: a network's VTA layers and their cycles on a configuration (perf model);
- :mod:`.template`, :mod:`.explore`: the search (grid or XGBoost + simulated annealing) and the
  Pareto front; :mod:`.finalists`: synthesis / tsim checks; :mod:`.report`: the outputs.
"""

from .explore import ExploreError, ExploreResult, Point, explore
from .network import Network, NetworkError, VTALayer, load_network, network_cycles
from .pareto import pareto_front
from .resources import ResourceModel, buffer_brams
from .space import HardwareCandidate, hardware_space

__all__ = ["ResourceModel", "buffer_brams", "HardwareCandidate", "hardware_space", "explore",
           "ExploreError", "ExploreResult", "Point", "Network", "NetworkError", "VTALayer",
           "load_network", "network_cycles", "pareto_front"]
