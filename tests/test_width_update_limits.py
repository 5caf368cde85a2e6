"""AWNN's width update (Algorithm 1, line 5; Eq. 11) refuses what it cannot do: a rate that is not
finite, or a width past :data:`~hacn_core.awnn.mlp.MAX_UPDATE_PARAMETERS` (a collapsed rate asks for
trillions of neurons). The message names the MLP, the layer and the rate; training stops before
anything is resized, so the run keeps its last checkpoint and resumes from it."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hacn_core.__main__ import _exits_cleanly
from hacn_core.awnn.callback import WidthCallback
from hacn_core.awnn.mlp import MAX_UPDATE_PARAMETERS, AdaptiveMLP, WidthUpdateError, update_widths
from hacn_core.engine.training import Callback, TrainConfig, fit, load_checkpoint


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), AdaptiveMLP(in_dim=4, out_dim=3, n_hidden_layers=2))


@pytest.mark.parametrize("raw,expected", [(-30.0, r"hidden layer 2: its rate nu=9.36e-14 \(raw_rate=-30\) gives a "
                                                  r"width of 24,606,517,068,080 neurons"),
                                          (math.nan, r"hidden layer 2: its rate is not finite \(raw_rate=nan\)"),
                                          (-math.inf, r"hidden layer 2: its rate is not finite \(raw_rate=-inf\)")])
def test_the_update_names_the_mlp_the_layer_and_the_rate_and_resizes_nothing(raw, expected):
    model = _model()
    mlp = model[1]
    widths = mlp.widths()
    with torch.no_grad():
        mlp.raw_rate[1] = raw
    with pytest.raises(WidthUpdateError, match=f"^AWNN width update of '1': {expected}"):
        update_widths(model)
    with pytest.raises(WidthUpdateError, match=f"^AWNN width update: {expected}"):
        update_widths([mlp])  # a list of MLPs: no name within a model to give
    assert mlp.widths() == widths


def test_the_largest_allowed_width_still_updates():
    mlp = AdaptiveMLP(in_dim=4, out_dim=3, n_hidden_layers=1)
    cap = MAX_UPDATE_PARAMETERS // (4 + 1 + 3) - 1  # hidden width whose (in+1)*D + (D+1)*out parameters fit
    assert mlp.config.bias and (4 + 1) * cap + (cap + 1) * 3 <= MAX_UPDATE_PARAMETERS
    mlp._check_update([cap], [0.0])  # within the cap: no error
    with pytest.raises(WidthUpdateError, match="above MAX_UPDATE_PARAMETERS"):
        mlp._check_update([cap + 2], [0.0])


class Collapse(Callback):
    """Sets the second hidden layer's raw rate to ``value`` after step ``at`` (a rate that collapsed)."""

    def __init__(self, at: int, value: float) -> None:
        self.at, self.value = at, value

    def on_step_end(self, state):
        if state.step == self.at:
            with torch.no_grad():
                state.model[1].raw_rate[1] = self.value


def test_a_refused_update_keeps_the_last_checkpoint_and_the_run_resumes_from_it(tmp_path):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(64, 4, generator=g)
    data, cfg = (X, X[:, :3].argmax(1)), TrainConfig(epochs=2, batch_size=8, lr=0.01, checkpoint_every_steps=4,
                                                    device="cpu")
    straight = fit(_model(), data, cfg, callbacks=[WidthCallback()], progress=False)
    with pytest.raises(WidthUpdateError, match="hidden layer 2: its rate nu="):
        fit(_model(), data, cfg, callbacks=[Collapse(6, -30.0), WidthCallback()], checkpoint_dir=tmp_path,
            progress=False)
    assert load_checkpoint(tmp_path / "last.pt")["position"]["global_step"] == 4  # the last one, untouched
    resumed = fit(_model(), data, cfg, callbacks=[WidthCallback()], checkpoint_dir=tmp_path, progress=False)
    assert resumed.segments == 2 and resumed.metrics == straight.metrics


def test_the_command_line_gives_one_line_and_exit_1(capsys):
    def command(argv):
        update_widths(_collapsed())
        return 0

    def _collapsed():
        model = _model()
        with torch.no_grad():
            model[1].raw_rate[0] = math.nan
        return model

    assert _exits_cleanly(command)(None) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: AWNN width update of '1': hidden layer 1: its rate is not finite") and \
        err.count("\n") == 1
