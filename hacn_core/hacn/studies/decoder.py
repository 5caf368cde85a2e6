"""H-ACN language-decoder study (H-ACN Sec. 3.4, Figs. 1b, 4, 9; Table 1's robustness).

One experiment, ``hacn-decoder``, pre-trains GPT-2 style decoders with RoPE
(:class:`hacn_core.models.decoder.GPTDecoder`) whose blocks are joined by the
ResNet, ACN or H-ACN rule (``a_i ~ N(0.25, 0.005)``) and measures, per run:

* the validation loss and perplexity over the whole held-out text (Fig. 4's final
  values), and the loss on fixed training and validation windows every
  ``eval_every_steps`` steps (the training curves);
* the layer-wise validation perplexity of every exit from one forward pass: the shared
  head (final norm + tied output matrix) on every partial sum (Fig. 4a/b, footnote 6;
  the paper: H-ACN is "far better at intermediate layers");
* for the weighted rules: ``a_1..a_L`` every ``record_every_steps`` steps, hence
  ``Gamma`` over training, ``Delta_t = ||a_T - a_t||`` (Fig. 6a's settling test) and
  the converged ``a`` (the connectivity matrix of Figs. 1b and 9, read from
  ``alpha_final`` and the recorded history);
* zero-shot multiple-choice accuracy with Table 1's character noise at
  ``p = 0, 0.01, 0.03``, scored by the length-normalised log-likelihood of each
  ending: offline, the cloze of held-out Tiny Shakespeare lines of
  :func:`hacn_core.hacn.text.shakespeare_cloze`
  (:func:`hacn_core.hacn.text.multiple_choice_accuracy`); at the paper profile,
  HellaSwag, PIQA and ARC-E read from their published files
  (:mod:`hacn_core.hacn.zeroshot`, Fig. 4c and Table 1).

Training data
-------------
nanoGPT's sampling: every training sequence is a window of ``block_size + 1``
tokens at a random start of the training tokens. Here window ``i`` of a run starts
at ``splitmix64(seed, i) mod (n - block_size)``, a counter-based draw
(:class:`TokenWindows`), so the run's ``steps x batch x accumulation`` windows are
one "epoch" of :func:`~hacn_core.engine.training.fit` (resumable at any step, no
array of starts held in memory, no window revisited by construction of the order).

Profiles
--------
``paper``: Table 4's decoder (24 layers, d 768, 12 heads, RoPE, sequence 256,
vocabulary 50,304, dropout 0.2, 208.54M parameters) on OpenWebText2 tokenised with
the GPT-2 BPE into ``$HACN_DATA/openwebtext2/{train,val}.bin`` (flat ``uint16``,
nanoGPT's format; the error says how to make them), Table 5's training (240k steps,
batch 128 with 4 accumulation steps, AdamW 1e-3, betas 0.9 / 0.95, weight decay
0.01, cosine with 5% warmup, clipping 1.0, bf16 autocast on a GPU), seeds 0-2. After
training, the zero-shot benchmarks of Fig. 4c (``zeroshot_benchmarks``: HellaSwag
validation, PIQA validation, ARC-Easy test) are scored at Table 1's noise levels
(``zeroshot_noise``, ``zeroshot_noise_draws = 3`` draws at p > 0) with the GPT-2 BPE,
when their published files are under the data root:
``$HACN_DATA/zeroshot/hellaswag/hellaswag_val.jsonl``,
``$HACN_DATA/zeroshot/piqa/valid.jsonl`` + ``valid-labels.lst``,
``$HACN_DATA/zeroshot/arc_easy/ARC-Easy-Test.jsonl`` and GPT-2's
``$HACN_DATA/gpt2-tokenizer/tokenizer.json`` (``python -m hacn_core fetch
gpt2-tokenizer``), read by :func:`hacn_core.engine.text.gpt2_tokenizer`, the
tokenizer that also makes the OpenWebText2 token files
(:func:`hacn_core.hacn.text.tokenize_documents`). They are read before training (a
malformed file stops the run at once); a missing one is recorded as
``zeroshot/<name>/not_evaluated`` with the message that names the path and the
source, and the run goes on (the stored result then has no accuracies; files added
later are scored on weights kept with ``$HACN_KEEP_MODELS`` through
:func:`hacn_core.hacn.zeroshot.evaluate_zeroshot`, since the configuration hash does
not change). Items with an ending over ``block_size // 2`` tokens are left out and
counted (``zeroshot/<name>/dropped_long``). There is no Shakespeare cloze
(``cloze_items = 0``).

``book``: Tiny Shakespeare at the character level (65 symbols; nanoGPT's 90 / 10
split), 12 layers (the depth at which connectivity can form blocks), d 64, 4 heads,
MLP 256, sequence 128 (0.60M parameters), batch 32, ``BOOK_STEPS`` steps (about 10
passes over the 1.0M training characters), no dropout (a model this small
underfits), otherwise Table 5's optimizer and schedule; the cloze has 300 items of
4 choices, 4 context lines; seeds 0-2.

How the book size was chosen (measured, one CPU thread)
--------------------------------------------------------
``benchmarks/bench_transformer_studies.py`` times one AdamW step of each rule at
the book size, interleaved (process CPU time, one thread, median of 5 repeats x 3
steps, batch 32 x 128 tokens, AdamW with clipping; on this project's 2-core
machine while two other trainings ran):

=========  ===========  ===============
rule       ms / step    ratio to ResNet
=========  ===========  ===============
resnet     479          1.00
acn        480          1.00
hacn       493          1.02
=========  ===========  ===============

(d 96 took 733-755 ms a step without clipping.) At about 0.48 s a step, 2,500
steps are 20.0-20.5 CPU-minutes of training; the periodic losses (11 x 512
windows, forward only), the final layer-wise perplexity (871 validation windows)
and the cloze (300 items at 3 noise levels) add about a minute: about 21.5
CPU-minutes a run, 9 runs (3 rules x 3 seeds) about 3.2 CPU-hours.

``smoke``: 2 layers, d 16, sequence 96, 20 steps, a 16-item cloze, seed 0: seconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import Dataset

from hacn_core.engine.data import DatasetMissingError, data_root
from hacn_core.engine.registry import Experiment, with_overrides
from hacn_core.engine.results import RunContext
from hacn_core.engine.training import Callback, TrainConfig, TrainState, fit
from hacn_core.hacn.studies import common as measure
from hacn_core.hacn.text import (
    CharTokenizer,
    multiple_choice_accuracy,
    read_tokens,
    shakespeare_cloze,
    split_text,
    tiny_shakespeare,
)
from hacn_core.hacn.zeroshot import BENCHMARKS, PAPER_NOISE, evaluate_zeroshot, prepare_zeroshot
from hacn_core.models.decoder import DecoderConfig, GPTDecoder, evaluate_layerwise_perplexity
from hacn_core.models.mixer import num_parameters

if TYPE_CHECKING:  # pragma: no cover
    from hacn_core.engine.dry_run import DryRunPlan

EXPERIMENT_ID = "hacn-decoder"
DATASETS: tuple[str, ...] = ("tinyshakespeare", "openwebtext2")
#: the rules of Fig. 4 and Table 1; ``hacn_code_gpt`` (the public code's GPT rule) is a named option
STUDY_RULES: tuple[str, ...] = ("resnet", "acn", "hacn")
RULE_OPTIONS: tuple[str, ...] = STUDY_RULES + ("hacn_code_gpt",)
#: the rules with residual weights a_i and the mean of their init (the public code's gate 1 - a_i starts near 0)
DEFAULT_MU: dict[str, float] = {"hacn": 0.25, "hacn_code_gpt": 1.0}
WEIGHTED_RULES: tuple[str, ...] = tuple(DEFAULT_MU)
SEEDS: tuple[int, ...] = (0, 1, 2)
#: Table 1's character-noise rates, offline on the Shakespeare cloze
CLOZE_NOISE: tuple[float, ...] = (0.0, 0.01, 0.03)
CLOZE_SEED = 0  # the same items and the same noise for every run
BOOK_STEPS = 2500
#: one AdamW step of the book-size model per rule, ms of process CPU time on one thread, as measured by
#: benchmarks/bench_transformer_studies.py (module docstring; two other trainings shared the 2-core
#: machine): what the book budget was sized from
BOOK_STEP_MS: dict[str, float] = {"resnet": 479.0, "acn": 480.0, "hacn": 493.0}
#: CPU-minutes a book run spends outside the optimizer steps (periodic losses, layer-wise perplexity, cloze),
#: as the module docstring estimates it ("about a minute")
BOOK_EVAL_MINUTES = 1.0
OWT2_FOLDER = "openwebtext2"  # under the data root: train.bin, val.bin (GPT-2 BPE ids, uint16)
#: the paper profile's zero-shot evaluation (Fig. 4c, Table 1); the other profiles have no such keys
_PAPER_ZEROSHOT = dict(zeroshot_benchmarks=list(BENCHMARKS), zeroshot_noise=list(PAPER_NOISE),
                       zeroshot_noise_draws=3, zeroshot_max_items=None)
EVAL_STREAM = 1 << 39  # index offset of the windows of the periodic training-loss estimate (never trained on)

_MODEL_KEYS = ("vocab_size", "block_size", "dim", "num_layers", "num_heads", "mlp_dim", "dropout")
_PAPER_MODEL = dict(vocab_size=50304, block_size=256, dim=768, num_layers=24, num_heads=12, mlp_dim=3072,
                    dropout=0.2)
_BOOK_MODEL = dict(vocab_size=65, block_size=128, dim=64, num_layers=12, num_heads=4, mlp_dim=256, dropout=0.0)
_SMOKE_MODEL = dict(vocab_size=65, block_size=96, dim=16, num_layers=2, num_heads=2, mlp_dim=64, dropout=0.0)


# ----------------------------------------------------------------------------- configurations


def make_config(rule: str, seed: int, *, profile: str = "book", alpha_mu: float | None = None,
                alpha_init: str = "normal", alpha_mu_end: float | None = None, **overrides: Any) -> dict[str, Any]:
    """One run at ``profile``'s scale (module docstring). ``alpha_mu``: the mean of ``a_i ~ N(mu, 0.005)``
    for the weighted rules (default 0.25 for ``hacn``, 1.0 for ``hacn_code_gpt``); ``None`` for the others.
    ``alpha_init`` ``"half_layers"`` or ``"exp_decay"``: App. D's depth-dependent init from ``alpha_mu`` at the
    first layer to ``alpha_mu_end`` at the last (:data:`~hacn_core.hacn.studies.common.DEPTH_INITS`); the
    default ``"normal"`` adds no entry, so the configuration hashes as before these existed."""
    if profile == "paper":
        model = _PAPER_MODEL
        run = dict(dataset="openwebtext2", steps=240_000, batch_size=128, accumulate=4, record_every_steps=1000,
                   eval_every_steps=2000, eval_windows=256, val_windows=4096, cloze_items=0, **_PAPER_ZEROSHOT)
    elif profile == "book":
        model = _BOOK_MODEL
        run = dict(dataset="tinyshakespeare", steps=BOOK_STEPS, batch_size=32, accumulate=1, record_every_steps=25,
                   eval_every_steps=250, eval_windows=256, val_windows=None, cloze_items=300)
    elif profile == "smoke":
        model = _SMOKE_MODEL
        run = dict(dataset="tinyshakespeare", steps=20, batch_size=8, accumulate=1, record_every_steps=5,
                   eval_every_steps=10, eval_windows=16, val_windows=64, cloze_items=16)
    else:
        raise ValueError(f"profile={profile!r} is not a profile; allowed: smoke, book, paper")
    config: dict[str, Any] = {
        **measure.residual_fields(rule, alpha_mu, DEFAULT_MU, alpha_init=alpha_init, alpha_mu_end=alpha_mu_end),
        **model,
        **run,
        "cloze_choices": 4,
        "cloze_context_lines": 4 if profile != "smoke" else 2,
        **measure.ADAMW_COSINE,
        "betas": [0.9, 0.95],
        "weight_decay": 0.01,
        "warmup_fraction": 0.05,
        "seed": seed,
    }
    return with_overrides(config, overrides)


def check_config(config: Mapping[str, Any]) -> None:
    """Reject configurations this experiment cannot run, naming the field and the allowed values."""
    measure.check_choices(config, {"dataset": DATASETS, "rule": RULE_OPTIONS, **measure.TRAINER_CHOICES})
    measure.check_counts(config, ("vocab_size", "block_size", "dim", "num_layers", "num_heads", "mlp_dim", "steps",
                                  "batch_size", "accumulate", "record_every_steps", "eval_every_steps",
                                  "eval_windows", "cloze_choices", "cloze_context_lines"), optional=("val_windows",))
    measure.check_residual_init(config, WEIGHTED_RULES)
    items = config["cloze_items"]
    if isinstance(items, bool) or not isinstance(items, int) or items < 0:
        raise ValueError(f"cloze_items={config['cloze_items']!r} must be an integer >= 0 (0: no cloze)")
    if config["eval_every_steps"] % config["record_every_steps"]:
        raise ValueError(f"eval_every_steps={config['eval_every_steps']} must be a multiple of "
                         f"record_every_steps={config['record_every_steps']} (the losses are taken at record points)")
    if not 0.0 <= config["dropout"] < 1.0:
        raise ValueError(f"dropout={config['dropout']!r} must be in [0, 1)")
    if config["dataset"] == "tinyshakespeare" and config["vocab_size"] != 65:
        raise ValueError(f"vocab_size={config['vocab_size']}: Tiny Shakespeare has 65 characters")
    if config["dataset"] == "openwebtext2" and config["cloze_items"]:
        raise ValueError("cloze_items must be 0 for openwebtext2: the Shakespeare cloze is character-level")
    check_zeroshot(config)


def check_zeroshot(config: Mapping[str, Any]) -> None:
    """The ``zeroshot_*`` entries (paper profile only; absent elsewhere: no zero-shot evaluation)."""
    benchmarks = config.get("zeroshot_benchmarks") or []
    if not isinstance(benchmarks, (list, tuple)) or len(set(benchmarks)) != len(benchmarks):
        raise ValueError(f"zeroshot_benchmarks={benchmarks!r} must be a list of distinct names; "
                         f"allowed: {', '.join(BENCHMARKS)}")
    for name in benchmarks:
        if name not in BENCHMARKS:
            raise ValueError(f"zeroshot_benchmarks: {name!r} is not valid; allowed: {', '.join(BENCHMARKS)}")
    if not benchmarks:
        return
    if config["dataset"] != "openwebtext2":
        raise ValueError(f"zeroshot_benchmarks needs dataset='openwebtext2' (the GPT-2 BPE), got "
                         f"dataset={config['dataset']!r}")
    noise = config["zeroshot_noise"]
    if (not isinstance(noise, (list, tuple)) or not noise
            or any(isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 for p in noise)):
        raise ValueError(f"zeroshot_noise={noise!r} must be a non-empty list of probabilities in [0, 1]")
    measure.check_counts(config, ("zeroshot_noise_draws",), optional=("zeroshot_max_items",))


# ----------------------------------------------------------------------------- data


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on ``uint64`` (Steele et al. 2014): a counter-based hash, uniform over 64 bits."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class TokenWindows(Dataset):
    """``length`` windows ``(x, y)`` of ``block_size`` tokens (``y`` shifted by one) from a flat token array.

    ``starts=None``: window ``i`` starts at ``splitmix64(seed * 2**40 + offset + i) mod (n - block_size)``
    (nanoGPT's uniform random windows, drawn by index); ``starts="tiled"``: window ``i`` starts at
    ``i * block_size`` (the held-out text cut into consecutive windows, every token scored once).
    ``__getitems__`` returns a whole batch ``(x, y)`` of ``int64`` tensors ``(B, block_size)``.
    """

    def __init__(self, tokens: np.ndarray, block_size: int, length: int, *, seed: int = 0, offset: int = 0,
                 starts: str | None = None) -> None:
        if len(tokens) < block_size + 1:
            raise ValueError(f"tokens: {len(tokens)} tokens are too few for block_size={block_size} (+1 target)")
        if starts not in (None, "tiled"):
            raise ValueError(f"starts={starts!r}: allowed None (random) or 'tiled'")
        if starts == "tiled" and length * block_size + 1 > len(tokens):
            raise ValueError(f"length={length}: only {(len(tokens) - 1) // block_size} tiled windows fit")
        self.tokens, self.block_size, self.length = tokens, block_size, length
        self.seed, self.offset, self.tiled = seed, offset, starts == "tiled"

    def __len__(self) -> int:
        return self.length

    def starts(self, idx: Sequence[int] | np.ndarray) -> np.ndarray:
        """First token of each window ``idx`` (int64)."""
        i = np.asarray(idx, dtype=np.int64)
        if self.tiled:
            return i * self.block_size
        key = np.uint64(self.seed) * np.uint64(1 << 40) + np.uint64(self.offset) + i.astype(np.uint64)
        return (splitmix64(key) % np.uint64(len(self.tokens) - self.block_size)).astype(np.int64)

    def __getitems__(self, idx: list[int]) -> tuple[Tensor, Tensor]:
        rows = self.starts(idx)[:, None] + np.arange(self.block_size + 1)  # (B, T + 1)
        window = torch.from_numpy(np.asarray(self.tokens[rows], dtype=np.int64))
        return window[:, :-1], window[:, 1:]

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        x, y = self.__getitems__([i])
        return x[0], y[0]

    def batches(self, batch_size: int) -> Iterator[tuple[Tensor, Tensor]]:
        """Every window in order, ``batch_size`` at a time."""
        for s in range(0, self.length, batch_size):
            yield self.__getitems__(list(range(s, min(s + batch_size, self.length))))


def whole_batch(batch: Any) -> Any:
    """``collate_fn`` of :class:`TokenWindows`: ``__getitems__`` already returns the batch."""
    return batch


def load_corpus(config: Mapping[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """``train`` / ``val`` token arrays, and for Tiny Shakespeare the held-out text and the tokenizer."""
    if config["dataset"] == "tinyshakespeare":
        text, tokenizer = tiny_shakespeare(root)
        train_text, val_text = split_text(text)
        return {"train": tokenizer.encode(train_text), "val": tokenizer.encode(val_text), "val_text": val_text,
                "tokenizer": tokenizer}
    base = data_root(root) / OWT2_FOLDER
    missing = [f for f in ("train.bin", "val.bin") if not (base / f).is_file()]
    if missing:
        raise DatasetMissingError(
            f"OpenWebText2 tokens not found: {', '.join(str(base / f) for f in missing)} missing. Make them once "
            "with a network (nanoGPT's approach): download OpenWebText2 (https://openwebtext2.readthedocs.io, "
            "the plug-and-play version), keep a small held-out split of its documents, and tokenise each split with "
            "the GPT-2 BPE into a flat uint16 file, every document followed by the end-of-text token 50256: "
            f"hacn_core.hacn.text.tokenize_documents(documents, gpt2_tokenizer(), '{base}/train.bin') and the same "
            f"for {base}/val.bin (gpt2_tokenizer from hacn_core.engine.text reads GPT-2's tokenizer.json, fetched "
            "by python -m hacn_core fetch gpt2-tokenizer). "
            "Set $HACN_DATA to put the data root elsewhere."
        )
    return {"train": read_tokens(base / "train.bin"), "val": read_tokens(base / "val.bin"), "val_text": None,
            "tokenizer": None}


# ----------------------------------------------------------------------------- model and training


def build_model(config: Mapping[str, Any]) -> GPTDecoder:
    """The decoder of ``config``: its rule, residual-weight init and Depth-adaptive LayerNorm (ACN family)."""
    alpha_init = measure.alpha_init_of(config)
    dec = DecoderConfig(vocab_size=config["vocab_size"], max_seq_len=config["block_size"], dim=config["dim"],
                        num_layers=config["num_layers"], num_heads=config["num_heads"], mlp_dim=config["mlp_dim"],
                        dropout=config["dropout"], rule=config["rule"], alpha_init=alpha_init,
                        depth_ln=config["depth_ln"])
    return GPTDecoder(dec, generator=torch.Generator().manual_seed(config["seed"]))


def train_config(config: Mapping[str, Any]) -> TrainConfig:
    """One ``fit`` epoch of ``steps`` optimizer steps (the windows are drawn by index: module docstring)."""
    return TrainConfig(
        epochs=1, batch_size=config["batch_size"], accumulate=config["accumulate"], lr=config["lr"],
        optimizer="adamw", betas=tuple(config["betas"]), weight_decay=config["weight_decay"],
        schedule="cosine", warmup_epochs=config["warmup_fraction"], grad_clip=config["grad_clip"],
        seed=config["seed"], record_every_steps=config["record_every_steps"], checkpoint_every_minutes=5.0,
    )


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy of logits ``(B, T, V)`` against targets ``(B, T)``."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def mean_loss(model: GPTDecoder, windows: TokenWindows, batch_size: int) -> float:
    """Token-weighted mean cross-entropy (nats) of ``model`` over every window of ``windows``, in eval mode."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in windows.batches(batch_size):
        logits = model(x.to(device))
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.to(device).reshape(-1),
                                       reduction="sum"))
        count += y.numel()
    model.train(was_training)
    return total / count


class PeriodicLosses(Callback):
    """At every ``every``-th step (a record point), the loss on fixed training and validation windows.

    Appends ``loss_step``, ``train_eval_loss`` and ``val_eval_loss`` to the run's curves (also at step 0).
    The training windows are drawn from the training tokens by index at ``EVAL_STREAM``, far past
    any window a run trains on; evaluation uses no random numbers, so a resumed run is unchanged.
    """

    def __init__(self, train: TokenWindows, val: TokenWindows, every: int, batch_size: int) -> None:
        self.train, self.val, self.every, self.batch_size = train, val, every, batch_size

    def on_record(self, state: TrainState) -> Mapping[str, Any] | None:
        if state.step % self.every:
            return None
        model = state.model
        return {"loss_step": state.step, "train_eval_loss": mean_loss(model, self.train, self.batch_size),
                "val_eval_loss": mean_loss(model, self.val, self.batch_size)}


def cloze_accuracies(model: GPTDecoder, val_text: str, tokenizer: CharTokenizer,
                     config: Mapping[str, Any]) -> dict[float, float]:
    """Zero-shot cloze accuracy at every rate of ``CLOZE_NOISE`` (Table 1's analogue), the same items for all."""
    items = shakespeare_cloze(val_text, n_items=config["cloze_items"], n_choices=config["cloze_choices"],
                              context_lines=config["cloze_context_lines"], seed=CLOZE_SEED)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        return {p: multiple_choice_accuracy(model, items, tokenizer, noise_p=p, seed=CLOZE_SEED,
                                            max_len=config["block_size"], device=device) for p in CLOZE_NOISE}
    finally:
        model.train(was_training)


def train_hacn_decoder(config: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Pre-train one decoder of the study and measure Fig. 4's perplexities, Gamma / Delta_t, the cloze (offline)
    or the zero-shot benchmarks (paper profile)."""
    check_config(config)
    corpus = load_corpus(config)
    T, B = config["block_size"], config["batch_size"]
    n_windows = config["steps"] * B * config["accumulate"]
    train = TokenWindows(corpus["train"], T, n_windows, seed=config["seed"])
    n_val = (len(corpus["val"]) - 1) // T
    val = TokenWindows(corpus["val"], T, min(n_val, config["val_windows"] or n_val), starts="tiled")
    eval_n = min(config["eval_windows"], val.length)
    periodic = PeriodicLosses(TokenWindows(corpus["train"], T, eval_n, seed=config["seed"], offset=EVAL_STREAM),
                              TokenWindows(corpus["val"], T, eval_n, starts="tiled"), config["eval_every_steps"], B)
    zeroshot = None
    if config.get("zeroshot_benchmarks"):  # read before training: a malformed file stops the run now
        zeroshot = prepare_zeroshot(config["zeroshot_benchmarks"], vocab_size=config["vocab_size"],
                                    max_items=config["zeroshot_max_items"], max_len=config["block_size"])
    torch.manual_seed(config["seed"])
    model = build_model(config)
    out = fit(model, train, train_config(config), loss_fn=lm_loss, collate_fn=whole_batch, callbacks=[periodic],
              checkpoint_dir=context.checkpoint_dir, progress=context.progress)
    c = out.curves
    device = next(model.parameters()).device
    layerwise_ppl = evaluate_layerwise_perplexity(model, val.batches(B), device=device).tolist()
    val_loss = mean_loss(model, val, B)
    probe = next(train.batches(B))
    metrics: dict[str, Any] = {
        "val_loss": val_loss,
        "val_perplexity": float(np.exp(val_loss)),
        "final_exit_perplexity": layerwise_ppl[-1],
        "half_depth_exit_perplexity": layerwise_ppl[len(layerwise_ppl) // 2],
        "train_loss": out.metrics["train_loss"],
        "parameters": num_parameters(model),
        "steps": out.steps,
        "tokens_seen": n_windows * T,
        "seconds": out.wall_time_s,
        "saved_activation_bytes": measure.saved_activation_bytes(model, (probe[0].to(device), probe[1].to(device))),
    }
    if config["cloze_items"]:
        for p, acc in cloze_accuracies(model, corpus["val_text"], corpus["tokenizer"], config).items():
            metrics[f"cloze_accuracy/{p:g}"] = acc
    zeroshot_curves: dict[str, list[float]] = {}
    if zeroshot is not None:
        zeroshot_metrics, zeroshot_curves = evaluate_zeroshot(
            model, zeroshot, config["zeroshot_noise"], config["zeroshot_noise_draws"], max_len=T, device=device)
        metrics |= zeroshot_metrics
    if device.type == "cuda":
        metrics["peak_cuda_bytes"] = int(torch.cuda.max_memory_allocated(device))
    measure.keep_trained_weights(config, model, context)
    curves: dict[str, list] = {
        "loss_step": c["loss_step"], "train_eval_loss": c["train_eval_loss"], "val_eval_loss": c["val_eval_loss"],
        "record_step": c["record_step"], "layerwise_val_perplexity": layerwise_ppl, **zeroshot_curves,
    }
    weight_metrics, weight_curves = measure.residual_weight_summary(c, config["num_layers"])
    metrics |= weight_metrics
    curves |= weight_curves
    if weight_curves:  # the whole history: Fig. 9's connectivity matrix during training
        curves["alpha_history"] = [[c[f"param/stack.alpha.{i}"][k] for i in range(config["num_layers"])]
                                   for k in range(len(c["record_step"]))]
    return {"metrics": metrics, "curves": curves, "device": out.device}


def dry_run_plan(config: dict[str, Any]) -> DryRunPlan:
    """One run's dry run: :func:`build_model`, random token windows of the configuration's length,
    :func:`lm_loss`, and the trainer settings of :func:`train_config` (one epoch of ``steps`` steps), the
    gradient accumulation folded into the planned batch."""
    from hacn_core.engine.dry_run import DryRunPlan

    check_config(config)

    def batch(b: int) -> tuple[Tensor, Tensor]:
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, config["vocab_size"], (b, config["block_size"] + 1), generator=gen)
        return ids[:, :-1], ids[:, 1:]

    key = {k: config[k] for k in ("dataset", "rule", *_MODEL_KEYS, "depth_ln")}
    # the dry run counts a step's FLOPs at its batch: an optimizer step of B sequences x A accumulation
    # steps is planned as one batch of B x A sequences (the same examples and the same update)
    per_step = config["batch_size"] * config["accumulate"]
    train = replace(train_config(config), batch_size=per_step, accumulate=1)
    return DryRunPlan(key=key | {"residual_weights": config["alpha_mu"] is not None},
                      model=lambda: build_model(config), batch=batch, train=train,
                      n_train=config["steps"] * per_step, loss=lambda model: lm_loss,
                      note=f"one optimizer step = {config['batch_size']} x {config['accumulate']} accumulated "
                           f"sequences of {config['block_size']} tokens",
                      timing_batch=config["batch_size"])


EXPERIMENT = Experiment(
    id=EXPERIMENT_ID,
    title="H-ACN GPT-2 decoder with RoPE: ResNet / ACN / H-ACN language models (H-ACN Sec. 3.4, Figs. 1b, 4, 9, "
          "Table 1)",
    train=train_hacn_decoder,
    plan=dry_run_plan,
    configs=measure.rule_grid(make_config, STUDY_RULES, SEEDS),
    setting={
        "smoke": "2-layer decoder (d 16), Tiny Shakespeare characters, sequence 96, 20 steps of batch 8, seed 0",
        "book": f"12-layer character-level decoder with RoPE, d 64, 4 heads, MLP 256, sequence 128 (0.60M "
                f"parameters) on Tiny Shakespeare, {BOOK_STEPS:,} steps of batch 32 (10.2M tokens), AdamW 1e-3 "
                "(0.9, 0.95), wd 0.01, cosine 5% warmup, clipping 1.0, no dropout, seeds 0-2; 300-item cloze at "
                "p = 0, 0.01, 0.03. Sized from a measured 0.48 s per step on one CPU thread (ResNet 479 ms, ACN 480, "
                "H-ACN 493): about 21.5 CPU-minutes a run, 3.2 CPU-hours for the 9 runs",
        "paper": "Table 4's GPT-2 (24 layers, d 768, RoPE, 208.54M) on OpenWebText2, Table 5's training (240k steps, "
                 "batch 128 x 4 accumulation, AdamW 1e-3 (0.9, 0.95), wd 0.01, cosine 5% warmup, clipping 1.0, bf16), "
                 "seeds 0-2; zero-shot HellaSwag / PIQA / ARC-E at p = 0, 0.01, 0.03 (3 noise draws) when their "
                 "files and the GPT-2 vocabulary are under $HACN_DATA",
    },
)
