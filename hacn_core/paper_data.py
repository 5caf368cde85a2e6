"""Every experiment's data, read through its study's own loader, for ``run EXP --dry-run --data``.

:func:`data_plan` gives, per experiment, a function ``(config, plan) -> DryRunPlan`` that turns the
study's dry-run plan (synthetic tensors of the right shape, :mod:`hacn_core.engine.data`) into one whose
``batch(b)`` returns ``b`` training examples as the study's training function hands them to the trainer:
read from the data root (``$HACN_DATA``) in the published format by the study's loader, split and
normalised as the run does, with the run's forward hook (augmentation, Mixup, a graph batch, a
sequence pair) where it trains with one. A batch larger than the files hold repeats their examples
(``index mod n``), so that a tiny data root steps at the planned batch; the group's ``data`` line then
says how many examples there were.

=========================================  ==============================================================
experiment                                  loader (files under the data root)
=========================================  ==============================================================
hacn-mixer(-long), hacn-mechanism,         ``mixer.load_data``: CIFAR-10 python batches
hacn-code-recipe
width-connectivity                          ``width_connectivity.load_data``: CIFAR-10, or a synthetic task
hacn-vit                                    ``vit.imagenet_splits``: ImageNet ImageFolder JPEGs (+ Mixup)
hacn-decoder, hacn-decoder-ablations        ``decoder.load_corpus``: OpenWebText2 uint16 token files, and
                                            ``zeroshot.prepare_zeroshot``: HellaSwag / PIQA / ARC-E files
awnn-images                                 ``images.load_image_splits``: MNIST IDX, CIFAR-10/100 batches
awnn-graphs                                 ``graphs.fold_data``: NCI1 / REDDIT-BINARY TU files
awnn-text                                   ``text.load_splits``: Multi30k jsonl, GPT-2's tokenizer.json
gates-mnist, gates-keras                    ``mnist.mnist_tensors``: MNIST IDX
gates-cifar                                 ``cifar.dataset_tensors``: CIFAR-10/100 batches (+ augmentation)
AWNN's synthetic tasks                      generated (``engine.data.synthetic_splits``): no files
hacn-mixer-cost                             none: the study times steps on a random batch
=========================================  ==============================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from hacn_core.engine.data import DATASETS, data_root
from hacn_core.engine.dry_run import DryRunPlan

DataPlan = Callable[[dict[str, Any], DryRunPlan], DryRunPlan]

_LOADED: dict[tuple, Any] = {}  # the last few loads: a study's groups mostly read the same split
_KEEP = 4


def _once(loader: Callable[..., Any], config: dict[str, Any], keys: tuple[str, ...], *args: Any) -> Any:
    """``loader(config, *args)``, read once per data root and per value of the ``keys`` it depends on."""
    key = (loader.__module__, loader.__qualname__, str(data_root()), tuple(repr(config.get(k)) for k in keys), args)
    if key not in _LOADED:
        while len(_LOADED) >= _KEEP:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = loader(config, *args)
    return _LOADED[key]


def _repeat(n: int, b: int) -> Tensor:
    if n < 1:
        raise ValueError("the training split read from the data root is empty")
    return torch.arange(b) % n  # a batch larger than the split repeats its examples


def tensor_plan(plan: DryRunPlan, x: Tensor, y: Tensor, source: str, **changes: Any) -> DryRunPlan:
    """``plan`` stepping on ``(x[i], y[i])`` for ``i = 0..b-1`` (mod ``len(x)``); ``source``: what was read."""
    def batch(b: int) -> tuple[Tensor, Tensor]:
        idx = _repeat(len(x), b)
        return x[idx].contiguous(), y[idx]

    return dataclasses.replace(plan, batch=batch, source=f"{source}; {len(x):,} training examples", **changes)


def _folder(name: str) -> str:
    return str(data_root() / DATASETS[name].folder)


def _image_source(name: str) -> str:
    return f"{name} from {_folder(name)}"


def _mixer(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.hacn.studies import mixer

    x, y = _once(mixer.load_data, config, ("dataset", "num_classes", "train_subset"))["train"]
    return tensor_plan(plan, x, y, _image_source(config["dataset"]) + " (mixer.load_data: validation split held "
                       "out, standardised)")


def _code_recipe(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.hacn.studies import code_recipe, mixer

    data_plan = _mixer(config, plan)
    stats = _once(mixer.standardisation, config, ("dataset", "num_classes", "train_subset"))
    return dataclasses.replace(data_plan, forward=code_recipe.augment_for(config, *stats))


def _width_connectivity(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.beyond import width_connectivity

    x, y = _once(width_connectivity.load_data, config, ("setting", "dataset", "num_classes", "train_subset",
                                                        "data_seed"))["train"]
    source = (_image_source(config["dataset"]) if config["setting"] == "mixer"
              else f"{config['dataset']}, generated (engine.data.synthetic_splits; no files)")
    return tensor_plan(plan, x, y, source)


def _vit(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.engine.augment import Mixup
    from hacn_core.hacn.studies import vit

    if config["dataset"] != "ImageNet":
        return _mixer(config, plan)
    train = vit.imagenet_splits(config)["train"]  # ImageFolder with the run's Inception crop and RandAugment

    def batch(b: int) -> tuple[Tensor, Tensor]:
        images, labels = zip(*(train[int(i)] for i in _repeat(len(train), b)))
        return torch.stack(images), torch.tensor(labels)

    mixup = Mixup(config["mixup"]) if config.get("mixup") is not None else None
    return dataclasses.replace(plan, batch=batch, forward=mixup,
                               source=f"ImageNet ImageFolder JPEGs from {train.root} ({len(train.classes)} class "
                                      f"folders, {len(train):,} images), the run's crops"
                                      + (" and Mixup" if mixup else ""))


def _decoder(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.hacn.studies import decoder
    from hacn_core.hacn.zeroshot import prepare_zeroshot

    corpus = decoder.load_corpus(config)
    T = config["block_size"]
    windows = decoder.TokenWindows(corpus["train"], T, 1 << 40, seed=config["seed"])  # the run's window draws
    source = f"{config['dataset']} token files ({len(corpus['train']):,} training tokens)"
    if config.get("zeroshot_benchmarks"):  # read before training, as the run does: a malformed file stops here
        suite = prepare_zeroshot(config["zeroshot_benchmarks"], vocab_size=config["vocab_size"],
                                 max_items=config["zeroshot_max_items"], max_len=T)
        read = ", ".join(f"{name} {len(items)} items" for name, items in suite.items.items())
        missing = ", ".join(suite.not_evaluated)
        source += f"; zero-shot files read: {read or 'none'}" + (f" (not evaluated: {missing})" if missing else "")
    return dataclasses.replace(plan, batch=lambda b: windows.__getitems__(list(range(b))), source=source)


def _awnn_images(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.awnn.studies import images
    from hacn_core.engine.augment import AugmentNormalize

    x, y = _once(images.load_image_splits, config, ("dataset", "data_seed", "train_subset", "eval_subset"))["train"]
    channels = x.shape[1]
    forward = AugmentNormalize(torch.zeros(channels), torch.ones(channels)) if config["augment"] else None
    return tensor_plan(plan, x, y, _image_source(config["dataset"]) + " (images.load_image_splits: outer split, "
                       "standardised)", forward=forward)


def _awnn_graphs(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.awnn.studies import graphs

    dataset, parts = _once(graphs.fold_data, config, ("dataset", "node_feature", "n_folds", "holdout", "fold_seed",
                                                      "split_file", "fold"))
    train = parts["train"]

    def batch(b: int) -> tuple[Any, Tensor]:
        data = graphs.collate_graphs([train[int(i)] for i in _repeat(len(train), b)])
        return data, data.y

    return dataclasses.replace(
        plan, batch=batch, model=lambda: graphs.build_model(config, dataset.num_features, dataset.num_classes),
        forward=lambda model, xy: graphs.gin_forward(model, xy[0]),
        source=f"{config['dataset']} TU files from {_folder(config['dataset'])} (fold {config['fold']}: "
               f"{len(train):,} training graphs, {dataset.num_features} node features)")


def _awnn_text(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.awnn.studies import text

    data = _once(text.load_splits, config, ("dataset", "direction", "max_len", "train_subset", "eval_subset",
                                            "min_chars", "max_chars", "noise_p", "noise_ops", "data_seed"))
    src, tgt_in, tgt_out = data.train
    pad = data.specials.pad
    width = max(src.shape[1], tgt_in.shape[1])  # one (B, 2, L) input: pad the shorter (seq2seq_forward cuts it)
    pair = torch.stack([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=pad) for t in (src, tgt_in)], 1)

    def batch(b: int) -> tuple[Tensor, Tensor]:
        idx = _repeat(len(src), b)
        return pair[idx], tgt_out[idx]  # (B, 2, L), (B, L_out)

    def forward(model: Any, xy: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        return text.seq2seq_forward(model, (xy[0][:, 0], xy[0][:, 1], xy[1]), pad)

    return dataclasses.replace(
        plan, batch=batch, model=lambda: text.build_model(config, data.vocab, pad), forward=forward,
        source=f"{config['dataset']} (text.load_splits: {len(src):,} training pairs, padded to {src.shape[1]} tokens)"
               + (f" from {_folder('Multi30k')}" if config["dataset"] == "Multi30k" else ""))


def _gates_mnist(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.gates.studies import mnist

    x, y = mnist.mnist_tensors.__wrapped__(True)  # not the cached one: the data root may differ between calls
    x, y = mnist.training_subset(x, y, config["train_subset"])
    return tensor_plan(plan, x, y, _image_source("MNIST") + " (flattened, in [0, 1])")


def _gates_cifar(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.engine.augment import AugmentNormalize
    from hacn_core.gates.studies import cifar

    x, y = cifar.dataset_tensors.__wrapped__(config["dataset"], True)  # uncached, as above
    mean, std = cifar.channel_stats(x, config["normalize"])
    forward = AugmentNormalize(mean, std, config["pad"], config["flip"])  # the run's crop, flip and normalisation
    return tensor_plan(plan, x, y, _image_source(config["dataset"]) + " (the run's crop, flip and normalisation)",
                       forward=forward)


def _synthetic(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    from hacn_core.awnn.studies import common
    from hacn_core.engine.data import synthetic_splits

    if "data" in config and "input_scale" in config:  # the adaptive studies' splits (awnn.studies.common)
        x, y = common.load_splits(config)["train"]
    else:
        x, y = synthetic_splits(config["dataset"], config["data_seed"])["train"]
    return tensor_plan(plan, x, y, f"{config['dataset']}, generated (engine.data.synthetic_splits; no files)")


def _no_data(config: dict[str, Any], plan: DryRunPlan) -> DryRunPlan:
    return dataclasses.replace(plan, source="none: the study times its steps on a random batch and reads no data")


#: experiment id -> how its plan reads the data root
DATA_PLANS: dict[str, DataPlan] = {
    "hacn-mixer": _mixer, "hacn-mixer-long": _mixer, "hacn-mechanism": _mixer, "hacn-code-recipe": _code_recipe,
    "hacn-mixer-cost": _no_data,
    "hacn-vit": _vit,
    "hacn-decoder": _decoder, "hacn-decoder-ablations": _decoder, "width-connectivity": _width_connectivity,
    "awnn-images": _awnn_images, "awnn-graphs": _awnn_graphs, "awnn-text": _awnn_text,
    "awnn-tabular-fixed": _synthetic, "awnn-tabular-adaptive": _synthetic, "awnn-kaiming-plus": _synthetic,
    "awnn-compress": _synthetic, "awnn-ablations": _synthetic, "awnn-fixed-plus": _synthetic,
    "gates-mnist": _gates_mnist, "gates-keras": _gates_mnist, "gates-cifar": _gates_cifar,
}


def data_plan(experiment_id: str) -> DataPlan:
    """How ``experiment_id``'s dry run reads the data root (:data:`DATA_PLANS`; the module docstring).
    An experiment missing from the table raises ``KeyError`` naming the table."""
    try:
        return DATA_PLANS[experiment_id]
    except KeyError:
        raise KeyError(f"experiment {experiment_id!r} has no entry in hacn_core.paper_data.DATA_PLANS (how its "
                       f"dry run reads the data root); experiments with one: {', '.join(sorted(DATA_PLANS))}") from None


__all__ = ["DATA_PLANS", "DataPlan", "data_plan", "tensor_plan"]
