"""The evaluation protocol of Errica et al. (2020): k outer folds, an inner hold-out per fold.

Errica, Podda, Bacciu and Micheli, "A fair comparison of graph neural networks for
graph classification" (ICLR 2020), which AWNN follows on NCI1 and REDDIT-B (AWNN
Sec. 4, Table 2):

* **risk assessment**: ``k = 10`` stratified outer folds; fold ``f``'s test set is one
  tenth of the data, its *outer training set* the other nine tenths;
* **model selection**: inside each outer training set, a stratified hold-out (10%) is
  the validation set; the configuration best on it is retrained on the same
  train / validation split (the validation set then drives early stopping) and
  scored on the fold's test set. The reported risk is the mean and std over folds.

For NCI1 (4,110 graphs) that gives the 3,699 / 411 outer split of AWNN Table 2 and an
inner split of about 3,329 / 370 of each outer training set.

:func:`assessment_folds` builds the folds, seeded (:func:`stratified_folds`,
:func:`stratified_holdout`), or reads published splits from a JSON file
(:func:`load_split_file`): a list with one ``{"train": [...], "test": [...]}`` object
per outer fold (optionally ``"validation": [...]``, a subset of ``"train"``, the inner
hold-out; otherwise it is drawn, seeded).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fold:
    """One outer fold: index arrays (sorted, int64) into the dataset.

    ``train`` and ``validation`` are the inner hold-out split of the outer training
    set (their union), ``test`` the fold's test set; the three are disjoint.
    """

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    @property
    def outer_train(self) -> np.ndarray:
        """The outer training set, ``train | validation`` (sorted)."""
        return np.sort(np.concatenate([self.train, self.validation]))


def _labels(labels: Sequence[int] | np.ndarray) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) == 0:
        raise ValueError(f"labels must be a non-empty 1-d sequence of class labels, got shape {y.shape}")
    return y


def _check_fraction(holdout: float) -> float:
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0.0 < holdout < 1.0:
        raise ValueError(f"holdout={holdout!r} must be a fraction in the open interval (0, 1) "
                         "(Errica et al. 2020: 0.1)")
    return float(holdout)


def stratified_folds(labels: Sequence[int] | np.ndarray, n_folds: int = 10, seed: int = 0) -> list[np.ndarray]:
    """``n_folds`` disjoint test sets covering ``range(len(labels))``, stratified by class.

    Each class's members, shuffled with ``seed``, are dealt to the folds in turn (the
    dealing continues from one class to the next), so every fold holds each class's
    count divided by ``n_folds`` up to one, and the fold sizes differ by at most one.
    """
    y = _labels(labels)
    if isinstance(n_folds, bool) or not isinstance(n_folds, int) or not 2 <= n_folds <= len(y):
        raise ValueError(f"n_folds={n_folds!r} must be an integer in [2, {len(y)}] (the number of samples)")
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)])
    fold_of = np.empty(len(y), dtype=np.int64)
    fold_of[order] = np.arange(len(y)) % n_folds
    return [np.flatnonzero(fold_of == f) for f in range(n_folds)]


def stratified_holdout(labels: Sequence[int] | np.ndarray, indices: np.ndarray, holdout: float = 0.1,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Split ``indices`` into ``(train, validation)``, ``validation`` a stratified ``holdout`` fraction.

    Each class among ``labels[indices]`` gives ``round(holdout * n_c)`` members
    (shuffled with ``seed``) to the validation set. Both parts are sorted.
    """
    fraction = _check_fraction(holdout)
    y = _labels(labels)
    idx = np.asarray(indices, dtype=np.int64)
    rng = np.random.default_rng(seed)
    val = []
    for c in np.unique(y[idx]):
        members = rng.permutation(idx[y[idx] == c])
        val.append(members[: int(round(fraction * len(members)))])
    validation = np.sort(np.concatenate(val))
    return np.setdiff1d(idx, validation), validation


def load_split_file(path: str | os.PathLike[str], n_samples: int) -> list[dict[str, np.ndarray]]:
    """Published outer splits: a JSON list of ``{"train": [...], "test": [...]}`` (optionally ``"validation"``).

    Checks that every index lies in ``[0, n_samples)``, that train and test are
    disjoint and that a validation list is part of train; raises naming the fold and key.
    """
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: a split file must hold a non-empty JSON list of {{train, test}} objects")
    folds = []
    for f, entry in enumerate(raw):
        if not isinstance(entry, dict) or not {"train", "test"} <= set(entry):
            raise ValueError(f"{path}: fold {f} must be an object with 'train' and 'test' index lists")
        fold = {}
        for key in ("train", "test", "validation"):
            if key not in entry:
                continue
            a = np.asarray(entry[key], dtype=np.int64)
            if a.ndim != 1 or (a.size and (a.min() < 0 or a.max() >= n_samples)) or len(np.unique(a)) != len(a):
                raise ValueError(f"{path}: fold {f} '{key}' must list distinct indices in [0, {n_samples})")
            fold[key] = np.sort(a)
        if np.intersect1d(fold["train"], fold["test"]).size:
            raise ValueError(f"{path}: fold {f} 'train' and 'test' overlap")
        if "validation" in fold and np.setdiff1d(fold["validation"], fold["train"]).size:
            raise ValueError(f"{path}: fold {f} 'validation' must be a subset of 'train' (the outer training set)")
        folds.append(fold)
    return folds


def assessment_folds(labels: Sequence[int] | np.ndarray, n_folds: int = 10, holdout: float = 0.1, seed: int = 0,
                     split_file: str | os.PathLike[str] | None = None) -> list[Fold]:
    """The folds of Errica et al. (2020): outer test sets and, per fold, the inner hold-out.

    Without ``split_file``: :func:`stratified_folds` with ``seed``, then fold ``f``'s
    outer training set split by :func:`stratified_holdout` with seed ``seed + 1 + f``.
    With it: the file's outer splits (``n_folds`` is then the file's count); a fold
    without a ``validation`` list gets a seeded stratified hold-out of its ``train``.
    """
    y = _labels(labels)
    _check_fraction(holdout)
    if split_file is not None:
        outer = [(f["train"], f["test"], f.get("validation")) for f in load_split_file(split_file, len(y))]
    else:
        tests = stratified_folds(y, n_folds, seed)
        outer = [(np.setdiff1d(np.arange(len(y)), t), t, None) for t in tests]
    folds = []
    for f, (train, test, validation) in enumerate(outer):
        if validation is None:
            inner_train, validation = stratified_holdout(y, train, holdout, seed + 1 + f)
        else:
            inner_train = np.setdiff1d(train, validation)
        folds.append(Fold(inner_train, validation, test))
    return folds


__all__ = ["Fold", "assessment_folds", "load_split_file", "stratified_folds", "stratified_holdout"]
