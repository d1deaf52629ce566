"""What a trial came to, as the driver reads it from Tune: finished (a candidate), stopped early by
the scheduler, diverged (a grid point that lost: its learning rate was too high), or failed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from adapterfleet.errors import cause_text
from adapterfleet.training.loop import TrainingDiverged
from adapterfleet.training.metrics import signed
from adapterfleet.tuning.spec import TrialParams
from adapterfleet.tuning.trial import FINAL_KEY


def is_divergence(error: BaseException | None) -> bool:
    """Whether a trial's error (Ray wraps it: `.cause`) is its training diverging."""
    return isinstance(getattr(error, "cause", error), TrainingDiverged)


@dataclass(frozen=True)
class TrialOutcome:
    params: TrialParams
    status: str  # "finished", "error" or "running" (anything not ended)
    result: dict[str, Any]
    error: str = ""  # a failed trial's cause, one line (`ValueError: ...`)
    diverged: bool = False  # failed because its training diverged: a point that lost

    @property
    def ended(self) -> bool:
        return self.status in ("finished", "error")

    @property
    def ok(self) -> bool:
        return self.status == "finished" and bool(self.result.get(FINAL_KEY))

    @property
    def stopped(self) -> bool:
        """Ended by the scheduler (ASHA) before its final report: neither failed nor a
        candidate (it saved no adapter). Tune marks the stopping result `done`; a trial cut
        off by an interrupted driver has no such result."""
        return self.status == "finished" and not self.ok and bool(self.result.get("done"))


def outcome_of_trial(trial: Any, status: str | None = None) -> TrialOutcome:
    """From a Tune `Trial`; `status` overrides its own (Tune calls `on_trial_complete`
    before it marks the trial TERMINATED)."""
    if status is None:
        status = {"TERMINATED": "finished", "ERROR": "error"}.get(trial.status, "running")
    result = dict(trial.last_result or {})
    error = trial_exception(trial) if status == "error" else None
    text = cause_text(error) if error is not None else ""
    params = TrialParams.from_config(trial.config)
    return TrialOutcome(params, status, result, text, is_divergence(error))


def trial_exception(trial: Any) -> BaseException | None:
    """The error of a failed Tune trial, from the one Tune pickled for it in the trial's local
    folder just before it calls back (None if none: `get_pickled_error` reads the storage
    copy, which is synced later)."""
    from ray import cloudpickle

    try:
        with open(trial.pickled_error_file, "rb") as file:
            error = cloudpickle.load(file)
    except Exception:  # noqa: BLE001 - only the wording of a failure line
        return None
    return error if isinstance(error, BaseException) else None


def outcome_of_result(result: Any) -> TrialOutcome:
    """From a `ray.tune.Result` of the grid `fit()` returns."""
    status = "error" if result.error is not None else "finished"
    error = cause_text(result.error) if result.error is not None else ""
    params = TrialParams.from_config(result.config)
    diverged = is_divergence(result.error)
    return TrialOutcome(params, status, dict(result.metrics or {}), error, diverged)


def choose_best(outcomes: Iterable[TrialOutcome], metric: str) -> TrialOutcome:
    """Best dev `metric` (the highest; the lowest for a lower-is-better one such as mse); ties
    go to the smaller reduction factor, then the smaller learning rate and seed."""
    key = f"best_dev_{metric}"
    return max(
        outcomes,
        key=lambda o: (
            signed(metric, float(o.result[key])),
            -o.params.reduction_factor,
            -o.params.learning_rate,
            -o.params.seed,
        ),
    )
