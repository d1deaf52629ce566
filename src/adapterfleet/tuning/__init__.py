"""Ray Tune sweeps of the adapter stage: the grid, the trial function, registration, resume.

One Tune experiment covers every task (task × reduction factor × learning rate × seed, or
Optuna's picks per task), optionally stopped early by ASHA per task; each task's best adapter
is registered as soon as all its trials have ended. Names are imported lazily, so
``import adapterfleet.tuning`` loads neither ray nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.tuning.outcomes import choose_best
    from adapterfleet.tuning.plan import SweepPlan, experiment_path, plan_sweep
    from adapterfleet.tuning.registration import Registrar, RegistrationCallback
    from adapterfleet.tuning.search import PerTaskScheduler, PerTaskSearcher, tune_options
    from adapterfleet.tuning.spec import (
        SweepContext,
        SweepError,
        TrialParams,
        grid,
        sweep_hash,
        task_config_hash,
        trial_id,
    )
    from adapterfleet.tuning.sweep import DEFAULT_MAX_FAILURES, run_sweep
    from adapterfleet.tuning.trial import TRAINABLE_NAME, make_trainable, run_trial

_WHERE = {
    "SweepPlan": "plan",
    "experiment_path": "plan",
    "plan_sweep": "plan",
    "RegistrationCallback": "registration",
    "Registrar": "registration",
    "choose_best": "outcomes",
    "PerTaskScheduler": "search",
    "PerTaskSearcher": "search",
    "tune_options": "search",
    "SweepContext": "spec",
    "SweepError": "spec",
    "TrialParams": "spec",
    "grid": "spec",
    "sweep_hash": "spec",
    "task_config_hash": "spec",
    "trial_id": "spec",
    "DEFAULT_MAX_FAILURES": "sweep",
    "run_sweep": "sweep",
    "TRAINABLE_NAME": "trial",
    "make_trainable": "trial",
    "run_trial": "trial",
}
__all__ = [
    "DEFAULT_MAX_FAILURES",
    "PerTaskScheduler",
    "PerTaskSearcher",
    "Registrar",
    "RegistrationCallback",
    "SweepContext",
    "SweepError",
    "SweepPlan",
    "TRAINABLE_NAME",
    "TrialParams",
    "choose_best",
    "experiment_path",
    "grid",
    "make_trainable",
    "plan_sweep",
    "run_sweep",
    "run_trial",
    "sweep_hash",
    "task_config_hash",
    "trial_id",
    "tune_options",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
