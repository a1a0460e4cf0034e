"""vta.tune: AutoTVM-style schedule tuning and AutoVTA hardware-parameter search.

The generic machinery (spaces, tasks, measurement executors, the XGBoost ranking model, simulated
annealing, tuners and logs) lives here; ``vta_tasks`` binds it to the compiler's operators and
``autovta.template`` to the accelerator's parameters (both imported here, which registers them).
"""

# The kit's templates and measurers register themselves on import: importing them here (the
# package runs before any of its modules) gives every process that uses vta.tune (a worker, a
# tuning log read back) the whole registry, while vta.tune.task, the registry, imports none of
# them (they import it).
from . import vta_tasks  # noqa: F401  (registers the operator templates)
from .autovta import template as _hardware_template  # noqa: F401  (registers autovta.hw)
from .log import LogRecord, TuningLog, best_per_workload, read_log
from .measure import (
    MeasureError,
    Measurer,
    MeasureResult,
    WrongResult,
    close_executor,
    make_executor,
    register_measurer,
)
from .space import ConfigEntity, ConfigSpace, SpaceError
from .task import Task, TaskError, features, template
from .tuner import TUNERS, GridTuner, RandomTuner, Tuner, TuneResult, XGBTuner

__all__ = [
    "ConfigSpace", "ConfigEntity", "SpaceError", "Task", "TaskError", "template", "features",
    "Measurer", "MeasureResult", "MeasureError", "WrongResult", "make_executor",
    "close_executor", "register_measurer", "Tuner", "XGBTuner", "RandomTuner", "GridTuner",
    "TUNERS", "TuneResult", "TuningLog", "LogRecord", "read_log", "best_per_workload",
]
