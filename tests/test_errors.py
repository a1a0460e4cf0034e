"""One error hierarchy: every exception class the kit defines derives from
vta.isa.errors.VTAError (so the CLI reports it on one line), and no two share a name."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict

import pytest
from vta.isa.errors import VTAError

LAYERS = ("isa", "sim", "hw", "runtime", "boards", "compiler", "tune", "cli")
#: Exceptions that are not about a user's input, each with the reason.
INTERNAL = {
    # a violation of the AXI protocol by the core's own RTL: a bug in the kit, not a bad input
    "vta.hw.axi_model.AxiProtocolError",
    # fsim's internal signal from the ALU step planner; fsim turns it into a ProgramError that
    # names the instruction (tests/sim/test_backend_checks.py)
    "vta.sim.loops.TooManyRounds",
    # the default-knob cache probe's internal signal "this would search"; defaults.probe
    # catches it and returns None (tests/graph/test_graph_jobs.py)
    "vta.compiler.topi.defaults._Miss",
}


def _kit_exceptions() -> list[type[BaseException]]:
    found = []
    for layer in LAYERS:
        pkg = importlib.import_module(f"vta.{layer}")
        names = [pkg.__name__] + [m.name for m in pkgutil.walk_packages(pkg.__path__,
                                                                        f"{pkg.__name__}.")]
        for name in names:
            if ".cocotb" in name:  # testbenches run inside the cocotb simulator only
                continue
            mod = importlib.import_module(name)
            found += [o for o in vars(mod).values()
                      if inspect.isclass(o) and issubclass(o, Exception)  # not signals
                      and not issubclass(o, Warning) and o.__module__ == name]
    return found


@pytest.mark.unit
def test_every_error_derives_from_vtaerror_once() -> None:
    errors = _kit_exceptions()
    assert len(errors) > 20  # the walk really found the kit's errors
    outside = [f"{e.__module__}.{e.__qualname__}" for e in errors
               if not issubclass(e, VTAError)]
    assert sorted(outside) == sorted(INTERNAL)
    by_name: dict[str, list[str]] = defaultdict(list)
    for e in errors:
        by_name[e.__qualname__].append(e.__module__)
    assert {n: m for n, m in by_name.items() if len(m) > 1} == {}
