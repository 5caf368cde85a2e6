"""The dry run of every paper profile (``hacn_core.engine.dry_run``, ``run --dry-run --data``).

One dry run of each experiment of the catalog at the paper profile, shared by the
tests below: each group's step reads its batch from a data root of tiny files in the
published formats (``tests/formats_fixtures.py``, written once for the module) through
the study's own loader (``hacn_core.paper_data``), so that every paper profile goes from
files on disk to an optimizer step. Configurations are grouped by model and input shape,
and the big networks step at a reduced batch (hacn-decoder-ablations' decoder also at a
reduced depth: :data:`SHALLOW`). The values are checked against what the
studies build and against closed forms: parameter counts, the FLOPs of linear layers
(forward 2, backward 4 per multiply-add), the optimizer steps of the paper's schedules,
and the loss of the first step recomputed from the fixture's bytes.

``-m paper_data_full`` (deselected by default: a user's check, not CI's) dry-runs every
group of every experiment at the paper's size, the groups :data:`THINNED` leaves out included.
"""

import contextlib
import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from hacn_core import catalog
from hacn_core.__main__ import main
from hacn_core.awnn import fast_cpp
from hacn_core.awnn.studies import adaptive
from hacn_core.awnn.studies import images as adaptive_images
from hacn_core.engine.dry_run import (
    DryRunPlan,
    classification_batch,
    dry_run,
    format_report,
    training_step,
)
from hacn_core.engine.registry import Experiment, matches
from hacn_core.engine.results import ResultsStore
from hacn_core.engine.training import Callback, TrainConfig
from hacn_core.gates.studies import cifar, mnist
from hacn_core.hacn.studies import mixer
from hacn_core.models.fc import mnist_fc
from hacn_core.paper_data import DATA_PLANS, data_plan

import formats_fixtures  # tests/formats_fixtures.py

BUDGET = 1e9  # FLOPs per CPU step before the batch is reduced (a twentieth of the command line's default)
NO_MODEL = {"exact-checks", "awnn-step-cost", "awnn-step-cells", "awnn-step-cells-fast", "awnn-step-phases",
            "gates-gate-gradients"}  # time or compute, and train nothing


# The transformers of H-ACN Sec. 3.3-3.4 are dry-run for one rule only: every rule builds the same network
# up to a few dozen scalars, and stepping the 208M-parameter decoder on one CPU thread takes about 18 s per
# group (its three rules: about a minute). width-connectivity's rules likewise differ by a few scalars on the
# same adaptive Mixer (CIFAR-10 and CIFAR-2) and stack: H-ACN's three groups stand for all.
# AWNN's Multi30k Transformer (103M parameters, most of them GPT-2-sized embeddings and output layer) is
# dry-run for its adaptive arm only: the fixed widths build the same network but for the FFNs, and stepping
# all six groups takes about 30 s on one CPU thread. The decoder's ablations (App. D) are hacn-decoder's H-ACN with
# another init of the same scalars, in two groups (with and without DepthLN's one scalar per layer): the group
# without DepthLN stands for both. The gated ResNets and WRNs of gates-cifar are dry-run on CIFAR-10 only: CIFAR-100
# builds the same networks but for a 100-way last layer, and its ten groups took about 15 s.
# hacn-mixer-long's paper profile is hacn-mixer's own (the converged study differs at the book's scale only):
# its H-ACN groups stand for the rest, which hacn-mixer dry-runs in full.
THINNED = {"hacn-decoder": {"rule": "hacn"}, "hacn-vit": {"rule": "hacn"}, "width-connectivity": {"rule": "hacn"},
           "hacn-mixer-long": {"rule": "hacn"},
           "awnn-text": {"ffn": "adaptive"}, "hacn-decoder-ablations": {"depth_ln": "none"},
           "gates-cifar": {"dataset": "CIFAR10"}}

# hacn-decoder-ablations' group is hacn-decoder's H-ACN decoder up to the init of a few scalars, and hacn-decoder
# steps that network at the paper's size (208M parameters: about 18 s on one CPU thread, most of it the 24 layers'
# init, matrix products and AdamW update). CI steps the ablations' group 2 layers deep instead of 24 (53M
# parameters, about 4 s): its own configurations, scalars, data files, loss and optimizer still go from the files
# to an optimizer step, on modules of the paper's width, vocabulary and sequence length. -m paper_data_full steps
# it at the paper's depth.
SHALLOW = {"hacn-decoder-ablations": {"num_layers": 2}}


#: AWNN's image study splits exactly the published 60,000 / 50,000 training images (Table 2's outer split);
#: the fixture's are split in about the same proportions
FIXTURE_OUTER_SPLIT = {"MNIST": (32, 8), "CIFAR10": (32, 8), "CIFAR100": (80, 20)}


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory):
    """A data root of tiny files in every published format, as ``$HACN_DATA`` (no download), with
    torchvision's MD5 check of CIFAR's published files off and AWNN's outer split at the fixture's size."""
    root = formats_fixtures.write_all(tmp_path_factory.mktemp("paper-data"))
    with pytest.MonkeyPatch.context() as patch, formats_fixtures.cifar_md5_check_off():
        patch.setenv("HACN_DATA", str(root))
        patch.setenv("HACN_DOWNLOAD", "0")
        patch.setattr(adaptive_images, "OUTER_SPLIT", FIXTURE_OUTER_SPLIT)
        yield root


def _overridden(experiment: Experiment, overrides: dict | None) -> Experiment:
    """``experiment`` with ``overrides`` applied to each of its paper configurations (:data:`SHALLOW`)."""
    if not overrides:
        return experiment
    return dataclasses.replace(experiment, configs={**experiment.configs, "paper": lambda: [
        c | overrides for c in experiment.runs("paper")]})


def _dry_runs(where_of, shallow=None) -> dict:
    """Every experiment's dry run at the paper profile on the data root's files (AWNN's Python node: nothing
    to compile); ``where_of(experiment_id)`` selects its configurations, ``shallow`` (:data:`SHALLOW`) overrides
    some of them."""
    store = ResultsStore()
    before = sorted(store.root.rglob("*")) if store.root.exists() else []
    rng = torch.get_rng_state()
    with fast_cpp.use_backend("python"):
        out = {e.id: dry_run(_overridden(e, (shallow or {}).get(e.id)), "paper", where=where_of(e.id),
                             flop_budget=BUDGET, data=data_plan(e.id) if e.plan is not None else None)
               for e in catalog.registry().values() if "paper" in e.configs}
    assert torch.equal(torch.get_rng_state(), rng)  # the caller's random state is restored
    assert (sorted(store.root.rglob("*")) if store.root.exists() else []) == before  # nothing stored
    return out


@pytest.fixture(scope="module")
def reports(fixture_root):
    return _dry_runs(THINNED.get, SHALLOW)


@pytest.mark.paper_data_full
def test_every_group_of_every_paper_profile_steps_on_the_fixture_files(fixture_root):
    for experiment_id, report in _dry_runs(lambda _: None).items():
        assert all(math.isfinite(g.step.loss) and g.source for g in report.groups), experiment_id


def _linear_step_flops(model: nn.Module, batch: int) -> int:
    """FLOPs of one training step of the linear layers: forward 2, backward 4 per multiply-add, except the
    first layer's input gradient (the input needs none): 2 less there."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    multiply_adds = sum(m.in_features * m.out_features for m in linears)
    return batch * (6 * multiply_adds - 2 * linears[0].in_features * linears[0].out_features)


def test_every_experiment_with_a_paper_profile_is_covered(reports):
    with_paper = {e.id for e in catalog.registry().values() if "paper" in e.configs}
    assert set(reports) == with_paper
    for experiment_id, report in reports.items():
        experiment = catalog.get(experiment_id)
        if experiment_id in NO_MODEL:
            assert experiment.plan is None and not report.groups
            assert "trains no model" in format_report(report)
            continue
        assert experiment.plan is not None, f"{experiment_id} trains models but has no dry-run plan"
        runs = [c for c in experiment.runs("paper") if matches(c, THINNED.get(experiment_id))]
        plans = sum(len(p) if isinstance(p := experiment.plan(c), list) else 1 for c in runs)
        assert sum(g.configs for g in report.groups) == plans  # every configuration in exactly one group
        assert len(report.groups) <= plans
        for g in report.groups:
            assert g.parameters > 0 and g.step.flops > 0 and math.isfinite(g.step.loss), (experiment_id, g.key)
            assert all(g.key[k] == v for k, v in SHALLOW.get(experiment_id, {}).items())  # and its report says so
            assert g.step.batch_size <= g.paper_batch
            for s in g.schedules:
                assert s.optimizer_steps == s.epochs * math.ceil(s.n_train / s.batch_size)
        assert report.gpu_hours > 0 and report.total_flops > 0


def test_gates_mnist_d50_counts_the_studys_own_network(reports):
    """Parameters = sum(p.numel()) of the network Sec. 3.1's study trains; FLOPs = the linear layers' closed
    form at the paper's batch of 128; steps = 100 epochs x ceil(60,000 / 128)."""
    groups = {(g.key["kind"], g.key["depth"]): g for g in reports["gates-mnist"].groups}
    assert len(groups) == len(mnist.KINDS) * len(mnist.DEPTHS)  # 3 seeds share each network
    for kind in mnist.KINDS:
        g = groups[kind, 50]
        config = mnist.make_config(kind, 50, 0)
        net = mnist_fc(kind, 50, config["width"], g=config["g"], k_init=config["k_init"], stem=config["stem"],
                       init=config["init"], bn_momentum=config["bn_momentum"])
        assert g.parameters == sum(p.numel() for p in net.parameters())
        assert g.configs == len(mnist.PAPER_SEEDS)
        assert g.step.batch_size == g.paper_batch == 128  # small enough to step at the paper's batch
        assert g.flops_per_step() == _linear_step_flops(net, 128)
        (schedule,) = g.schedules
        assert schedule.optimizer_steps == 100 * 469 == 46_900


def test_one_linear_layer_costs_six_flops_per_multiply_add_and_reduced_batches_scale():
    """A toy experiment: ``Linear(8, 16) -> tanh -> Linear(16, 4)`` at batch 64 on 1,000 examples. The second
    layer costs 6 x in x out x batch (forward 2, backward 4: weight and input gradient); the first 4 (its
    input needs no gradient). A budget below one step reduces the batch, and the FLOPs scale back exactly."""
    def plan(config):
        return DryRunPlan(key={"hidden": 16},
                          model=lambda: nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)),
                          batch=classification_batch((8,), 4), n_train=1000,
                          train=TrainConfig(epochs=config["epochs"], batch_size=64, lr=0.1, optimizer="sgd"))

    toy = Experiment("toy-dry-run", "toy", train=lambda c, ctx: {}, configs={"paper": lambda: [
        {"epochs": 3, "seed": s} for s in range(4)]}, setting={}, plan=plan)
    full = dry_run(toy, "paper")
    (g,) = full.groups
    assert g.configs == 4 and g.step.batch_size == 64 and not g.reduced
    assert g.flops_per_step() == 64 * (4 * 8 * 16 + 6 * 16 * 4)
    assert g.optimizer_steps == 4 * 3 * math.ceil(1000 / 64) == 4 * 3 * 16
    small = dry_run(toy, "paper", flop_budget=6 * 16 * 4 * 10)  # room for about 5 samples per step
    (r,) = small.groups
    assert r.reduced and 1 <= r.step.batch_size < 64
    assert r.flops_per_step() == g.flops_per_step() and r.total_flops == g.total_flops
    assert f"reduced batch of {r.step.batch_size}" in format_report(small)


class _EveryOperator(TorchDispatchMode):
    """Counts every operator dispatched inside it: the count the dry run kept beside FlopCounterMode before
    StepCounter counted both in one pass."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _tiny_decoder():
    from hacn_core.hacn.studies import decoder

    config = decoder.make_config("hacn", 0, profile="paper", dim=32, num_layers=2, num_heads=2, mlp_dim=64,
                                 block_size=16)
    return decoder.build_model(config), torch.randint(0, config["vocab_size"], (2, 16))


@pytest.mark.parametrize("build", [
    lambda: (mixer.build_model(mixer.make_config("hacn", 0, profile="smoke"), 28, 1), torch.randn(2, 1, 28, 28)),
    lambda: (mnist_fc("gated_resnet", 10), torch.randn(4, 784)),  # BatchNorm1d
    lambda: (cifar.build_model(cifar.make_config("CIFAR10", "resnet5", "gated", 0)), torch.randn(2, 3, 32, 32)),
    _tiny_decoder,  # embedding, rotary positions, scaled dot-product attention, H-ACN's mixing
], ids=["mixer", "fc-batchnorm1d", "gated-resnet-batchnorm2d", "decoder"])
@pytest.mark.parametrize("decompose_batch_norm", [False, True], ids=["batch-norm-whole", "batch-norm-decomposed"])
def test_step_counter_counts_what_flop_counter_mode_and_an_operator_counter_count(build, decompose_batch_norm,
                                                                                  monkeypatch):
    """One StepCounter over forward and backward counts the FLOPs FlopCounterMode counts and the operators a
    plain counting mode above it counts, exactly; with batch norm run whole (StepCounter.UNDECOMPOSED) or
    decomposed into its parts as FlopCounterMode does it (the parts add no FLOPs and are no operators)."""
    from torch.utils.flop_counter import FlopCounterMode

    from hacn_core.engine.dry_run import StepCounter

    if decompose_batch_norm:
        monkeypatch.setattr(StepCounter, "UNDECOMPOSED", frozenset())
        monkeypatch.setattr(StepCounter, "_handling", {})
    torch.manual_seed(0)
    model, x = build()
    model.train()

    def forward_backward(*modes):
        torch.manual_seed(1)  # the same dropout masks under either count
        model.zero_grad(set_to_none=True)
        with contextlib.ExitStack() as stack:
            for mode in modes:
                stack.enter_context(mode)
            model(x).float().square().mean().backward()

    flop_counter, operators, step_counter = FlopCounterMode(display=False), _EveryOperator(), StepCounter()
    forward_backward(flop_counter, operators)  # the operator counter on top, as the dry run stacked them
    forward_backward(step_counter)
    assert step_counter.flops == flop_counter.get_total_flops() > 0
    assert step_counter.ops == operators.ops > 0
    assert StepCounter.handling(torch.ops.aten.native_batch_norm.default)[1] is decompose_batch_norm


class _StateAfterStep(Callback):
    def on_step_end(self, state) -> None:
        self.state = {k: v.clone() for k, v in state.model.state_dict().items()}


def _toy_step(flop_budget=None, batch_size=None):
    """``Linear(8, 16) -> BatchNorm1d -> ReLU -> Dropout -> Linear(16, 4)`` (forward: 2 x (128 + 64) = 384 FLOPs a
    sample; BatchNorm1d: the smallest batch is 2), the paper's batch 64; the step and the state it leaves."""
    spy = _StateAfterStep()
    plan = DryRunPlan(key={}, model=lambda: nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                                          nn.Dropout(0.5), nn.Linear(16, 4)),
                      batch=classification_batch((8,), 4), n_train=1000, callbacks=lambda loss: [spy],
                      train=TrainConfig(epochs=1, batch_size=64, lr=0.1, optimizer="sgd"))
    step = training_step(plan, batch_size, **({} if flop_budget is None else {"flop_budget": flop_budget}))
    return step, spy.state


@pytest.mark.parametrize("flop_budget, batch", [(10 * 3 * 384, 10), (1000, 2)], ids=["redone", "went-on"])
def test_the_forward_that_chooses_the_batch_leaves_no_trace(flop_budget, batch):
    """The affordable batch is chosen from the FLOPs of the step's own forward at the smallest batch: 3 x 384 FLOPs
    a sample against the budget gives 10 (the step stops after that forward and is taken afresh at 10) or, under
    one sample's worth, the smallest batch, 2 (the step goes on from that forward). Either way the step is the one
    taken at that batch directly: the same FLOPs (10 x (4 x 128 + 6 x 64) at 10), operators, loss (the dropout
    masks: the random state was put back) and state after the step (BatchNorm's running statistics: one batch
    tracked, not two)."""
    chosen, after = _toy_step(flop_budget=flop_budget)
    direct, direct_after = _toy_step(batch_size=batch)
    assert chosen.batch_size == direct.batch_size == batch
    assert chosen.flops == direct.flops == batch * (4 * 8 * 16 + 6 * 16 * 4)
    assert (chosen.ops, chosen.loss) == (direct.ops, direct.loss)
    assert after.keys() == direct_after.keys() and all(torch.equal(after[k], direct_after[k]) for k in after)
    assert int(after["1.num_batches_tracked"]) == 1


def test_paper_schedules_and_gate_parameters(reports):
    """Mixer: 300 epochs x ceil(45,000 / 64) steps, the 2-class task as many steps (to half an epoch);
    ResNet-5: 164 epochs x 391 steps, and its gates add 15 parameters (Sec. 3.2)."""
    mix = {(g.key["arch"], g.key["rule"], g.key["num_classes"]): g for g in reports["hacn-mixer"].groups}
    assert mix["mixer", "resnet", 10].optimizer_steps == 3 * 300 * 704
    two = mix["mixer", "resnet", 2].schedules[0]
    assert abs(two.optimizer_steps - 300 * 704) <= two.steps_per_epoch / 2 and two.n_train == 9000
    assert mix["mixer", "hacn", 10].configs == 9  # mu 0.25 / 0.75 / 1 x 3 seeds: one model
    res = {(g.key["dataset"], g.key["gated"]): g for g in reports["gates-cifar"].groups
           if g.key["recipe"] == "resnet"}
    assert res["CIFAR10", True].parameters - res["CIFAR10", False].parameters == 15
    assert res["CIFAR10", True].configs == 6  # gated and k decay: the same network
    assert res["CIFAR10", False].schedules[0].optimizer_steps == 164 * 391
    wrn = [g for g in reports["gates-cifar"].groups if g.key["blocks_per_stage"] == 6]  # WRN (6,10) + dropout
    assert wrn and all(g.reduced for g in wrn)  # the WRN (6,10) steps at a reduced batch
    for g in wrn:
        config = cifar.make_config("CIFAR10", "wrn-6-10-dropout", "gated" if g.key["gated"] else "original", 0)
        assert g.parameters == sum(p.numel() for p in cifar.build_model(config).parameters())


def test_flops_scale_linearly_with_the_batch():
    plan = mixer.dry_run_plan(mixer.make_config("hacn", 0, profile="paper"))
    one, two = training_step(plan, 1), training_step(plan, 2)
    assert two.flops == 2 * one.flops and one.parameters == two.parameters


class _AfterWidthUpdate(Callback):
    """Runs after the study's callbacks: sees the state the dry-run step leaves."""

    def __init__(self) -> None:
        self.begun = self.ended = False

    def on_train_begin(self, state) -> None:
        self.begun = True
        self.start_rates = state.model.rates().detach().clone()

    def on_step_end(self, state) -> None:
        self.ended = True
        self.rates = state.model.rates().detach().clone()
        self.widths, self.target = state.model.widths(), state.model.target_widths()


def test_awnn_step_includes_the_elbo_and_the_width_update():
    """The step's loss is Eq. 13's negative ELBO (N = 1,750 on Spiral, not a mean cross-entropy), the
    optimizer moves the rate and the width follows it (Algorithm 1, line 5) before the next step."""
    config = adaptive.paper_configs()[0]
    plan = adaptive.dry_run_plan(config)
    spy = _AfterWidthUpdate()
    spied = dataclasses.replace(plan, callbacks=lambda elbo: [*plan.callbacks(elbo), spy])
    with fast_cpp.use_backend("python"):
        step = training_step(spied, 32)
        torch.manual_seed(0)
        model = adaptive.build_model(config)
        x, y = plan.batch(32)
        elbo = plan.loss(model)(model(x), y)
    assert spy.begun and spy.ended
    assert step.loss == pytest.approx(float(elbo.detach()), rel=1e-6) and step.loss > 100
    assert not torch.equal(spy.rates, spy.start_rates)
    assert spy.widths == spy.target


#: experiments whose data is generated or not read: their data line says so instead of naming files
NO_FILES = {"awnn-tabular-fixed", "awnn-tabular-adaptive", "awnn-kaiming-plus", "awnn-compress", "awnn-ablations",
            "awnn-fixed-plus", "hacn-mixer-cost"}


def test_every_paper_profile_steps_on_files_read_from_the_data_root(reports, fixture_root):
    """Every experiment that trains a model has a data plan, and each group's step read its batch from the
    fixture files through the study's loader (the report's data line names them), in the shape the synthetic
    plan gives the model (fixed-shape inputs: images, token windows)."""
    with_plan = {e.id for e in catalog.registry().values() if "paper" in e.configs and e.plan is not None}
    assert with_plan <= set(DATA_PLANS)
    for experiment_id in with_plan:
        for g in reports[experiment_id].groups:
            if experiment_id in NO_FILES or g.key.get("dataset") == "SpiralHard":
                assert "no files" in g.source or "reads no data" in g.source, (experiment_id, g.source)
            else:
                assert str(fixture_root) in g.source or "token files" in g.source, (experiment_id, g.source)
        assert f"data: {reports[experiment_id].groups[0].source}" in format_report(reports[experiment_id])
    decoder = reports["hacn-decoder"].groups[0].source
    assert "hellaswag 3 items, piqa 3 items, arc_easy 3 items" in decoder  # the zero-shot files, read before training
    for experiment_id, config in (("hacn-vit", {"rule": "hacn"}), ("hacn-decoder", {"rule": "hacn"}),
                                  ("gates-cifar", {"dataset": "CIFAR10"}), ("hacn-mixer", None)):
        experiment = catalog.get(experiment_id)
        first = next(c for c in experiment.runs("paper") if matches(c, config))
        plan = experiment.plan(first)
        real = data_plan(experiment_id)(first, plan)
        assert real.batch(3)[0].shape == plan.batch(3)[0].shape, experiment_id


def test_the_mnist_step_trains_on_the_fixture_bytes(fixture_root):
    """gates-mnist's step on the data root: its loss is the cross-entropy of the freshly built network on
    the first 128 training images of the IDX file (its 40 images repeated), read here with numpy."""
    raw = fixture_root / "MNIST" / "raw"
    pixels = np.frombuffer((raw / "train-images-idx3-ubyte").read_bytes()[16:], np.uint8).reshape(-1, 784)
    labels = np.frombuffer((raw / "train-labels-idx1-ubyte").read_bytes()[8:], np.uint8)
    idx = np.arange(128) % len(labels)
    x, y = torch.tensor(pixels[idx], dtype=torch.float32) / 255.0, torch.tensor(labels[idx], dtype=torch.long)
    config = mnist.make_config("gated_resnet", 50, 0)
    real = data_plan("gates-mnist")(config, mnist.dry_run_plan(config))
    step = training_step(real, 128)
    torch.manual_seed(0)
    with torch.no_grad():
        expected = nn.functional.cross_entropy(real.model()(x), y)
    assert step.loss == pytest.approx(float(expected), rel=1e-6)
    synthetic = training_step(mnist.dry_run_plan(config), 128)
    assert synthetic.flops == step.flops and synthetic.loss != step.loss


def test_pg19_books_become_token_files_a_decoder_steps_on(fixture_root):
    """PG-19's books (one plain-text file each) go through ``tokenize_documents`` into flat uint16 token files,
    every book followed by GPT-2's end-of-text id, and the decoder's window sampler feeds a step on them (a
    width-reduced twin of Table 4's decoder: the same code path, a 2-layer d-64 model)."""
    from hacn_core.hacn.studies import decoder
    from hacn_core.hacn.text import read_tokens

    pg19 = fixture_root / "pg19"
    formats_fixtures.tokenize_corpus(fixture_root, pg19 / "train", pg19 / "validation", "pg19")
    tokens = read_tokens(fixture_root / "pg19" / "train.bin")
    assert tokens.dtype == np.uint16 and int((tokens == formats_fixtures.GPT2_EOT_ID).sum()) == 3  # three books
    config = decoder.make_config("hacn", 0, profile="paper", dim=64, num_layers=2, num_heads=2, mlp_dim=256)
    windows = decoder.TokenWindows(tokens, config["block_size"], 1 << 20, seed=0)
    plan = dataclasses.replace(decoder.dry_run_plan(config), batch=lambda b: windows.__getitems__(list(range(b))))
    step = training_step(plan, 2)
    assert math.isfinite(step.loss) and step.loss == pytest.approx(math.log(config["vocab_size"]), rel=0.1)


def test_command_line_dry_run_on_data(capsys, fixture_root, tmp_path):
    assert main(["run", "gates-mnist", "--profile", "paper", "--dry-run", "--data", "--where", "depth=50",
                 "kind=gated_resnet", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"data: MNIST from {fixture_root / 'MNIST' / 'raw'} (flattened, in [0, 1]); 40 training examples" in out
    assert "through the study's own loader" in out and not list(tmp_path.iterdir())
    assert main(["run", "gates-mnist", "--profile", "paper", "--data", "--where", "depth=50"]) == 2
    assert "--data go with --dry-run" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    os.environ["HACN_DATA"] = str(empty)  # restored by fixture_root's MonkeyPatch at the module's end
    try:
        assert main(["run", "hacn-vit", "--profile", "paper", "--dry-run", "--data", "--where", "rule=hacn"]) == 2
        assert "ImageNet-1k not found" in capsys.readouterr().err
    finally:
        os.environ["HACN_DATA"] = str(fixture_root)


def test_command_line_dry_run(capsys, tmp_path):
    net = mnist_fc("gated_resnet", 50)
    assert main(["run", "gates-mnist", "--profile", "paper", "--dry-run", "--where", "depth=50", "kind=gated_resnet",
                 "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{sum(p.numel() for p in net.parameters()):,} parameters" in out
    assert "stands for 3 configurations" in out and "46,900 optimizer steps" in out
    assert "FlopCounterMode" in out and "GPU-hours assume" in out and "TFLOP/s" in out
    assert not list(Path(tmp_path).iterdir())  # nothing stored
    assert main(["run", "awnn-step-cost", "--profile", "paper", "--dry-run"]) == 0
    assert "trains no model" in capsys.readouterr().out


def test_command_line_errors_are_one_line(capsys):
    """A wrong experiment or profile ends the command with one line on stderr and status 2: once as a process
    (``python -m hacn_core``: the exit status and both streams as a shell sees them), and in this process for
    the other error (the same ``main``; a second interpreter start would add seconds of imports, nothing else)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "hacn_core", "run", "no-such-experiment", "--dry-run"],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "unknown experiment 'no-such-experiment'" in done.stderr
    assert "Traceback" not in done.stderr
    assert main(["run", "gates-mnist", "--profile", "huge", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "unknown profile 'huge'" in err and "Traceback" not in err


def test_the_thinned_converged_mixer_has_the_short_studys_paper_profile():
    """THINNED's premise for hacn-mixer-long: at the paper's setting it is hacn-mixer, run for run."""
    assert mixer.LONG.configs["paper"]() == mixer.EXPERIMENT.configs["paper"]()
