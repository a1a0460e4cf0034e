"""vta.tune: AutoTVM-style schedule tuning and AutoVTA hardware-parameter search.

The generic machinery (spaces, tasks, measurement executors, the XGBoost ranking model, simulated
annealing, tuners and logs) lives here; ``vta_tasks`` binds it to the compiler's operators.
"""

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
