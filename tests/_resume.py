"""A study's run killed mid-training and run again equals the uninterrupted run (the AWNN domain studies' tests).

``module`` is the study module (its ``fit`` is wrapped to raise ``KeyboardInterrupt`` after
``kill_at`` optimizer steps), ``train`` its train function; checkpoints are written every 2 steps.
"""

from __future__ import annotations

import pytest

from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback


def resumed_equals_uninterrupted(module, train, config, tmp_path, monkeypatch, kill_at):
    """Kill a run after ``kill_at`` steps (checkpoints every 2 steps), run it again: same result."""
    monkeypatch.setenv("HACN_CHECKPOINT_EVERY", "2steps")
    real_fit = module.fit

    class Kill(Callback):
        def on_step_end(self, state):
            if state.step == kill_at:
                raise KeyboardInterrupt

    def killing_fit(*args, callbacks=(), **kwargs):
        return real_fit(*args, callbacks=[*callbacks, Kill()], **kwargs)

    ref = train(config, RunContext(module.EXPERIMENT_ID, tmp_path / "a", progress=False))
    monkeypatch.setattr(module, "fit", killing_fit)
    with pytest.raises(KeyboardInterrupt):
        train(config, RunContext(module.EXPERIMENT_ID, tmp_path / "b", progress=False))
    monkeypatch.setattr(module, "fit", real_fit)
    again = train(config, RunContext(module.EXPERIMENT_ID, tmp_path / "b", progress=False))
    drop = {"cpu_s"}
    assert {k: v for k, v in again["metrics"].items() if k not in drop} == {
        k: v for k, v in ref["metrics"].items() if k not in drop}
    for key, values in ref["curves"].items():
        assert str(again["curves"][key]) == str(values), key  # str: NaN equals NaN
    return ref
