"""Algorithm 1 of AWNN inside the trainer: width updates after every step, with logging.

:class:`WidthCallback` runs ``update_width`` (Algorithm 1, line 5) of every
:class:`hacn_core.awnn.mlp.AdaptiveMLP` of a model trained by
:func:`hacn_core.engine.training.fit` with an :class:`hacn_core.awnn.elbo.ELBOLoss`
(Eq. 13), sets an annealed rate prior (Sec. 5.3) and logs widths, rates and the
terms of the negative ELBO per epoch.
"""

from __future__ import annotations

import torch

from hacn_core.awnn.elbo import ELBOLoss, RatePriorSchedule
from hacn_core.awnn.mlp import adaptive_mlps, model_widths, update_widths
from hacn_core.engine.training import Callback, TrainState


class WidthCallback(Callback):
    """Algorithm 1's ``update_width`` inside :func:`hacn_core.engine.training.fit`, with logging.

    * ``on_train_begin``: attaches the optimizer to every :class:`AdaptiveMLP` of the
      model, so that resizes keep its state in sync;
    * ``on_step_end``: :func:`update_widths` after every optimizer step, i.e. right
      before the next forward (Algorithm 1, line 5), and the rate prior of
      ``schedule`` (Sec. 5.3) for the epoch of that *next* step, so every step of
      0-based epoch ``e`` runs under ``schedule(e)`` ("at epoch 1000": all steps
      after 1,000 completed epochs, none before);
    * ``on_record``: ``awnn/widths`` (all hidden widths, module order),
      ``awnn/total_width``, ``awnn/rates`` and, with an :class:`ELBOLoss`,
      ``elbo/<term>``, the mean of each term of Eq. 13 over the batches since the
      previous record (NaN at the record before training).
    """

    def __init__(self, elbo: ELBOLoss | None = None, schedule: RatePriorSchedule | None = None) -> None:
        if schedule is not None and elbo is None:
            raise ValueError("schedule= needs elbo= (the ELBOLoss whose rate prior it sets)")
        self.elbo, self.schedule = elbo, schedule
        self._mlps: list | None = None  # the model's adaptive MLPs, found once per fit (no walk per step)

    def _set_prior(self, state: TrainState) -> None:
        if self.schedule is not None:
            # after an epoch's last step the trainer still reports that epoch; the next step is the next one's
            next_epoch = state.epoch + (1 if state.step_in_epoch >= state.steps_per_epoch else 0)
            self.elbo.rate_prior = self.schedule(next_epoch)

    def on_train_begin(self, state: TrainState) -> None:
        self._mlps = adaptive_mlps(state.model)  # a model keeps its modules while it trains
        for m in self._mlps:
            m.attach_optimizer(state.optimizer)
        update_widths(state.model, state.optimizer)  # a resumed run follows its loaded rates
        self._set_prior(state)

    def on_step_end(self, state: TrainState) -> None:
        # update_widths without the walk over the modules (one host read of the rates on a GPU)
        update_widths(self._mlps if self._mlps is not None else adaptive_mlps(state.model), state.optimizer)
        if self.schedule is not None:
            self._set_prior(state)

    def state_dict(self) -> dict[str, object]:
        """The ELBO sums of the epoch in progress (so a resumed epoch logs the same means)."""
        return {} if self.elbo is None else self.elbo.state_dict()

    def load_state_dict(self, state: dict[str, object]) -> None:
        if self.elbo is not None:
            self.elbo.load_state_dict(state)

    def on_record(self, state: TrainState) -> dict[str, object]:
        widths = model_widths(state.model)
        with torch.no_grad():
            rates = [float(nu) for m in adaptive_mlps(state.model) for nu in m.rates()]
        out: dict[str, object] = {"awnn/widths": widths, "awnn/total_width": sum(widths), "awnn/rates": rates}
        if self.elbo is not None:
            out.update({f"elbo/{k}": v for k, v in self.elbo.pop_means().items()})
        return out


class WidthTrace(Callback):
    """The total hidden width of the model's adaptive MLPs every ``every`` optimizer steps.

    ``steps`` and ``widths`` are the step counts and total widths (the width *after*
    that step's update, i.e. the width of the next forward), from step 0 (before
    training). Kept through a resume (``state_dict``), so a resumed run traces the
    same curve. Read them with :meth:`curves` after training.
    """

    def __init__(self, every: int) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every={every!r} must be an integer >= 1 (optimizer steps)")
        self.every = every
        self.steps: list[int] = []
        self.widths: list[int] = []

    def _trace(self, state: TrainState) -> None:
        if state.step % self.every == 0 and (not self.steps or self.steps[-1] != state.step):
            self.steps.append(int(state.step))
            self.widths.append(int(sum(model_widths(state.model))))

    def on_train_begin(self, state: TrainState) -> None:
        self._trace(state)

    def on_step_end(self, state: TrainState) -> None:
        self._trace(state)

    def state_dict(self) -> dict[str, object]:
        return {"steps": list(self.steps), "widths": list(self.widths)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.steps = [int(s) for s in state.get("steps", [])]
        self.widths = [int(w) for w in state.get("widths", [])]

    def curves(self) -> dict[str, list[int]]:
        """``{"trace_step": [...], "trace_width": [...]}``."""
        return {"trace_step": list(self.steps), "trace_width": list(self.widths)}
