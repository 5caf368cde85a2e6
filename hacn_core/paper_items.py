"""The registry of every table, figure and analytic claim in the three papers.

This module feeds the book's *reproduction ledger*: each :class:`PaperItem` is
one number (or one qualitative claim) that a paper reports, with where in the
paper it sits and where in this project it can be checked. It is pure Python
(no torch) so that the ledger, the docs and the tests can import it anywhere.

Coverage, per paper (ids start with ``hacn/``, ``awnn/`` or ``gates/``):

- **H-ACN** (Hybrid Auto-Compressing Networks, anonymous submission): Eqs. 1-5 and 7,
  Alg. 1, Figs. 1-9, every cell of Tables 1-3, 6 and 7, the parameter count of
  Table 4, the numbers the text quotes for Figs. 3-4 and Sec. 4, and, from the
  later version of the paper only (the one with Appendices H-I), Table 8 and
  Fig. 10.
- **AWNN** (Errica et al., Adaptive Width Neural Networks): Eqs. 11-15 and
  19-20, Figs. 1-11, every cell of Table 1 (accuracy and total width, fixed and
  AWNN, as separate items), the sample counts of Table 2, Tables 3-5 (settings),
  the "Fixed+" table of App. D and the numbers the text quotes for Figs. 5-6.
- **Residual Gates** (Savarese et al., Residual Gates): the
  gated-layer rules of Sec. 2, Figs. 1-7 and every cell of Tables 1-6.

Figures get ``paper_value=None`` and a ``note`` that states the claim they
show, which a run can check. Numbers are transcribed exactly as printed; where
the paper's two versions differ the note says which one was used.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PAPERS",
    "ID_PATTERN",
    "PaperItem",
    "PAPER_ITEMS",
    "items_for",
    "item",
    "as_records",
]

#: The three papers, as spelled in :attr:`PaperItem.paper`.
PAPERS: tuple[str, ...] = ("H-ACN", "AWNN", "Residual Gates")
#: The id prefix each paper's items use.
PAPER_PREFIX: dict[str, str] = {"H-ACN": "hacn", "AWNN": "awnn", "Residual Gates": "gates"}
#: ``<prefix>/<item slug>/<quantity slug>[/...]``: lowercase, digits, ``.`` and ``-``.
ID_PATTERN = re.compile(r"^(hacn|awnn|gates)(/[a-z0-9][a-z0-9.-]*){2,}$")


@dataclass(frozen=True)
class PaperItem:
    """One reported number (or qualitative claim) of one paper.

    ``paper_value`` is the number exactly as the paper prints it, ``None`` for a
    figure or a claim the paper gives no number for; ``paper_std`` is the spread
    printed next to it (``±`` or the parenthesised std). ``where`` says where it
    can run in this project (data, hardware, budget), ``source`` where it is in the
    paper.
    """

    id: str
    paper: str
    item: str
    quantity: str
    paper_value: float | None
    paper_std: float | None = None
    unit: str = ""
    higher_is_better: bool | None = None
    paper_setting: str = ""
    where: str = ""
    source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.paper not in PAPERS:
            raise ValueError(f"PaperItem.paper={self.paper!r} is not a paper; allowed: {', '.join(PAPERS)}")
        if not ID_PATTERN.match(self.id):
            raise ValueError(
                f"PaperItem.id={self.id!r} is malformed; expected {ID_PATTERN.pattern} "
                "(e.g. 'gates/table1/mnist-d50-gated-resnet')"
            )
        prefix = PAPER_PREFIX[self.paper]
        if not self.id.startswith(prefix + "/"):
            raise ValueError(f"PaperItem.id={self.id!r} must start with {prefix + '/'!r} for paper {self.paper!r}")
        if self.paper_std is not None and self.paper_value is None:
            raise ValueError(f"PaperItem.paper_std is set but paper_value is None ({self.id})")
        if self.paper_value is not None and not self.unit:
            raise ValueError(f"PaperItem.unit is empty for numeric item {self.id}")
        if self.paper_value is None and not self.note:
            raise ValueError(f"PaperItem.note must state the claim of qualitative item {self.id}")
        for name in ("quantity", "item", "source", "where"):
            if not getattr(self, name):
                raise ValueError(f"PaperItem.{name} is empty ({self.id})")

    @property
    def qualitative(self) -> bool:
        """True when the paper gives no number (a figure or a stated claim)."""
        return self.paper_value is None


# --------------------------------------------------------------------------- #
# Where each item can run here: the data it needs, the hardware, the budget.
# --------------------------------------------------------------------------- #
W_EXACT = "CPU, exact"
W_HACN_MIXER = "download (CIFAR-10); offline analogue on Fashion-MNIST"
W_HACN_TASK = "download (CIFAR-10, ImageNet); offline analogue: 2-class vs 10-class"
W_HACN_VIT = "download (ImageNet-1k, GPU); offline analogue"
W_HACN_GPT = (
    "download (OpenWebText2, HellaSwag/PIQA/ARC-E; GPU); offline analogue: char-level GPT on Tiny Shakespeare"
)
W_HACN_PG19 = "download (PG-19; GPU); offline analogue: char-level GPT on Tiny Shakespeare"
W_AWNN_TAB = "CPU, full paper settings"
W_AWNN_MNIST = "MNIST offline (GPU for full length)"
W_AWNN_CIFAR = "download (CIFAR-10/100)"
W_AWNN_NCI1 = "NCI1 offline (CPU, reduced budget)"
W_AWNN_REDDIT = "download (REDDIT-BINARY)"
W_AWNN_MT = "download (Multi30k); offline smoke only"
W_GATES_MNIST = "CPU/GPU, full paper settings, offline MNIST"
W_GATES_CIFAR = "download (CIFAR-10/100); offline analogue"
W_LIT = "literature value quoted by the paper; not reproduced here"

HACN, AWNN, GATES = PAPERS

# Short settings, reused by many items.
S_MIXER = "MLP-Mixer 16L d=128, CIFAR-10, AdamW lr 1e-3, batch 64, 300 epochs, alpha ~ N(0.25, 0.005)"
S_VIT = "ViT 12L, ImageNet-1k, 300 epochs, setup of Beyer et al. (2022)"
S_GPT = "GPT-2 24L d=768, RoPE, seq 256, OpenWebText2, 240k steps x batch 128 (~30B tokens)"
S_GPT_PG19 = "GPT-2 24L d=768, RoPE, seq 256, PG-19"
S_GPT_ABL = "GPT-2 24L d=768, RoPE, PG-19, 6B training tokens (ablation budget)"
S_GATES_MNIST = (
    "FC net: linear(50) + d layers of width 50 (Dot-BN-ReLU) + softmax, MNIST, "
    "Adam with Nesterov momentum lr 0.002, batch 128, 100 epochs, k init 1"
)
S_GATES_WRN = "(Wide) ResNets, SGD+Nesterov, batch 128, flips+crops, k init 1, no k decay"
S_AWNN_TAB = "MLP, Adam lr 0.01, k=0.9, rate 0.01, uninformative width prior, 10 runs"
S_AWNN_IMG = "ResNet-20 with adaptive classifier head, SGD lr 0.1, 200 epochs, rate 0.02, 10 runs"
S_AWNN_GRAPH = "GIN with adaptive MLPs, protocol of Errica et al. (2020), rate 0.02, 10 runs"
S_AWNN_MT = "Transformer 6+6 layers, d=512, 8 heads, adaptive FFNs, rate 0.004, 10 runs"


def _hacn() -> list[PaperItem]:
    """H-ACN items: equations, Figs. 1-10, Tables 1-8."""
    P = HACN
    out: list[PaperItem] = []
    add = out.append

    # ---- analytic: equations, Alg. 1, Fig. 8, the definition of Gamma ------
    eqs = [
        ("eq1", "Eq. 1", "acn-resnet-common-output",
         "ACN and ResNet forward rules with a common output sum",
         "ACN: x_i = f_i(x_{i-1}); ResNet: x_i = f_i(x_{i-1}) + x_{i-1}; both output y = sum_{i=0..L} f_i(x_{i-1}) "
         "with f_0 = x_0 (the later version writes y = x_0 + sum_{i=1..L} f_i(x_{i-1}), the same sum). "
         "Check: a ResNet's final residual stream equals that sum."),
        ("eq2", "Eq. 2", "hybrid-forward-rule",
         "H-ACN forward rule x_i = f_i(x_{i-1}) + a_i x_{i-1}, y = sum_i f_i(x_{i-1})",
         "a_i = 0 for all i is exactly an ACN, a_i = 1 for all i exactly a ResNet."),
        ("eq3", "Eq. 3", "input-as-weighted-sum",
         "input of layer k as sum_{i<k} c_{i->k} h_i",
         "Every layer input is a linear combination of the earlier layer outputs h_i (h_0 = embedding)."),
        ("eq4", "Eq. 4", "direct-layer-connectivity",
         "direct layer connectivity c_{i->j} = prod_{l=i+1..j-1} a_l",
         "C[j-1][j] = 1 (empty product); C is (L+1)x(L+1), upper triangular; column k holds the weights of Eq. 3."),
        ("eq5", "Eq. 5", "layer4-expansion",
         "expansion x_4 = h_3 + a_3 h_2 + a_3 a_2 h_1 + a_3 a_2 a_1 h_0",
         "Unrolling Eq. 2 gives the coefficients of Eq. 4."),
    ]
    for slug, item_, qslug, quantity, note in eqs:
        add(PaperItem(f"hacn/{slug}/{qslug}", P, item_, quantity, None, paper_setting="analytic",
                      where=W_EXACT, source=f"Sec. 2, {item_}", note=note))
    add(PaperItem("hacn/alg1/forward-pass", P, "Alg. 1", "pseudo-code of the H-ACN forward pass", None,
                  paper_setting="analytic", where=W_EXACT, source="App. G, Algorithm 1",
                  note="current += layer(x); x = layer(x) + a_i * x; classify current. a = 0 gives an ACN, a = 1 "
                       "a ResNet; must agree with Eq. 2."))
    for sub, arch, pattern in [
        ("a", "resnet", "C[i][j] = 1 for all i < j"),
        ("b", "ffn", "C[j-1][j] = 1, all other entries 0"),
        ("c", "acn", "C[j-1][j] = 1 and C[i][L] = 1 for all i < L, the rest 0"),
    ]:
        add(PaperItem(f"hacn/fig8{sub}/{arch}-connectivity", P, f"Fig. 8{sub}",
                      f"connectivity matrix C of a {arch.upper() if arch != 'resnet' else 'ResNet'}", None,
                      paper_setting="analytic", where=W_EXACT, source="Sec. 2 and App. C, Fig. 8",
                      note=f"{pattern} (Sec. 2 bullet list)."))
    add(PaperItem("hacn/sec4/gamma-acn", P, "Sec. 4", "total connectivity strength Gamma = ||a||_2 / sqrt(L) of an ACN",
                  0.0, unit="Gamma", paper_setting="analytic (all a_i = 0)", where=W_EXACT,
                  source="Sec. 4, definition of Gamma", note="Gamma = 0 for ACNs."))
    add(PaperItem("hacn/sec4/gamma-resnet", P, "Sec. 4",
                  "total connectivity strength Gamma = ||a||_2 / sqrt(L) of a ResNet",
                  1.0, unit="Gamma", paper_setting="analytic (all a_i = 1)", where=W_EXACT,
                  source="Sec. 4, definition of Gamma", note="Gamma = 1 for ResNets."))
    add(PaperItem("hacn/eq7/depthln-strength-init", P, "Eq. 7",
                  "initial strength s of Depth-adaptive LayerNorm, alpha_l = 1 + l*s", 0.05, unit="s",
                  paper_setting="analytic", where=W_EXACT, source="App. D, Eq. 7",
                  note="DepthLN(x_l) = alpha_l * LN(x_l), one learnable s per layer initialised at 0.05 "
                       "(the public code instead learns one scalar per layer initialised to 1 + 0.05 l)."))

    # ---- Fig. 1 / Fig. 2 (Mixer, task difficulty) -------------------------
    add(PaperItem("hacn/fig1a/vision-connectivity", P, "Fig. 1a", "learned connectivity matrix C, vision classifiers",
                  None, paper_setting=f"{S_MIXER}; {S_VIT}", where=W_HACN_MIXER, source="Fig. 1a; Sec. 4",
                  note="Vision models converge to C with stronger near-diagonal entries (local connectivity "
                       "between adjacent layers)."))
    add(PaperItem("hacn/fig1b/language-connectivity", P, "Fig. 1b", "learned connectivity matrix C, GPT-2 decoders",
                  None, paper_setting=S_GPT_PG19, where=W_HACN_PG19, source="Fig. 1b; Sec. 4; App. E",
                  note="Language models develop block-structured (modular) C with selective long-range "
                       "connections between layer groups."))
    add(PaperItem("hacn/fig2a/layerwise-accuracy", P, "Fig. 2a", "layer-wise test accuracy of Res / ACN / H-ACN",
                  None, higher_is_better=True, paper_setting=S_MIXER + "; dashed: 2-class CIFAR",
                  where=W_HACN_MIXER, source="Sec. 3.2 and 3.2.1, Fig. 2a",
                  note="H-ACN's final accuracy is comparable to ResNet's while its early layers already reach "
                       "high accuracy like an ACN (auto-compression); in the 2-class case (dashed) auto-compression "
                       "increases, for H-ACN even more than for ACN."))
    add(PaperItem("hacn/fig2b/train-loss", P, "Fig. 2b", "training loss vs epoch of Res / ACN / H-ACN", None,
                  higher_is_better=False, paper_setting=S_MIXER, where=W_HACN_MIXER, source="Sec. 3.2, Fig. 2b",
                  note="H-ACN trains much faster than ACN and even below ResNet's training loss."))
    add(PaperItem("hacn/fig2b/acn-extra-epochs", P, "Fig. 2b",
                  "extra epochs an ACN needs to match H-ACN and ResNet", 100.0, unit="epochs",
                  higher_is_better=False, paper_setting=S_MIXER, where=W_HACN_MIXER, source="Sec. 3.2",
                  note="'approximately 100 additional epochs'."))
    add(PaperItem("hacn/fig2c/learned-alpha", P, "Fig. 2c", "converged residual weights a_i, 10-class vs 2-class",
                  None, paper_setting=S_MIXER + "; 2-class CIFAR subset", where=W_HACN_TASK,
                  source="Sec. 3.2.1, Fig. 2c",
                  note="The converged a_i are smaller in the binary (2-class) task than in the 10-class task."))

    # ---- Fig. 3: ViT on ImageNet ------------------------------------------
    add(PaperItem("hacn/fig3a/vit-accuracy-vs-epochs", P, "Fig. 3a", "ViT top-1 accuracy vs epochs", None,
                  higher_is_better=True, paper_setting=S_VIT, where=W_HACN_VIT, source="Sec. 3.3, Fig. 3a",
                  note="H-ACN matches ResNet's training speed; ACN is much slower."))
    add(PaperItem("hacn/fig3a/acn-epochs-to-match", P, "Fig. 3a",
                  "epochs an ACN ViT needs to match Res / H-ACN", 700.0, unit="epochs", higher_is_better=False,
                  paper_setting=S_VIT, where=W_HACN_VIT, source="Sec. 3.3",
                  note="'approximately 700 epochs to match the performance of the counterparts'."))
    for arch, label, v in [("res", "Res", 78.77), ("acn", "ACN", 78.69), ("hacn", "H-ACN", 79.2)]:
        add(PaperItem(f"hacn/fig3b/vit-imagenet-{arch}", P, "Fig. 3b",
                      f"best final top-1 accuracy (%) of the {label} ViT on ImageNet-1k", v, unit="%",
                      higher_is_better=True, paper_setting=S_VIT, where=W_HACN_VIT, source="Sec. 3.3, Fig. 3b",
                      note="Also the noise-0 row of Fig. 3c." if arch != "acn" else ""))
    for sigma, res, res_sd, h, h_sd in [("0.1", 76.57, 0.03, 77.02, 0.05), ("0.3", 66.89, 0.03, 67.59, 0.04)]:
        for arch, label, v, sd in [("res", "Res", res, res_sd), ("hacn", "H-ACN", h, h_sd)]:
            add(PaperItem(f"hacn/fig3c/vit-noise{sigma}-{arch}", P, "Fig. 3c",
                          f"top-1 accuracy (%) of the {label} ViT under zero-mean Gaussian input noise, std {sigma}",
                          v, sd, unit="%", higher_is_better=True, paper_setting=S_VIT, where=W_HACN_VIT,
                          source="Sec. 3.3, Fig. 3c",
                          note="The paper does not say what the ± is over (presumably noise draws)."))

    # ---- Fig. 4 and Table 1: GPT-2 ----------------------------------------
    add(PaperItem("hacn/fig4a/owt2-layerwise-ppl", P, "Fig. 4a", "layer-wise validation perplexity, OWT-2", None,
                  higher_is_better=False, paper_setting=S_GPT, where=W_HACN_GPT, source="Sec. 3.4, Fig. 4a",
                  note="H-ACN's intermediate layers have far lower perplexity than ResNet's (log scale); the final "
                       "layers are on par."))
    add(PaperItem("hacn/fig4b/pg19-layerwise-ppl", P, "Fig. 4b", "layer-wise validation perplexity, PG-19", None,
                  higher_is_better=False, paper_setting=S_GPT_PG19, where=W_HACN_PG19, source="Sec. 3.4, Fig. 4b",
                  note="Same picture as Fig. 4a on PG-19: better intermediate layers, on-par final layer."))
    for data, slug, setting, where, hv, rv in [
        ("OWT-2", "owt2", S_GPT, W_HACN_GPT, 19.78, 19.82),
        ("PG-19", "pg19", S_GPT_PG19, W_HACN_PG19, 16.78, 16.65),
    ]:
        for arch, label, v in [("hacn", "H-ACN", hv), ("res", "Res", rv)]:
            add(PaperItem(f"hacn/fig4/{slug}-final-ppl-{arch}", P, "Fig. 4a" if slug == "owt2" else "Fig. 4b",
                          f"final-layer (top-1) validation perplexity of {label} on {data}", v, unit="perplexity",
                          higher_is_better=False, paper_setting=setting, where=where,
                          source="Sec. 3.4, footnote 8"))
    for arch, label, v in [("hacn", "H-ACN", 41.8), ("res", "Res", 41.2)]:
        add(PaperItem(f"hacn/fig4c/zero-shot-average-{arch}", P, "Fig. 4c",
                      f"average zero-shot accuracy (%) of {label} over HellaSwag, PIQA, ARC-E", v, unit="%",
                      higher_is_better=True, paper_setting=S_GPT + "; zero-shot", where=W_HACN_GPT,
                      source="Sec. 3.4, text on 'Table 4c' (Fig. 4, right)",
                      note="Only the average is given in the text; the per-task bars are not transcribed in "
                           "either version."))
    for p, res, res_sd, h, h_sd in [("0", 29.16, None, 29.12, None), ("0.01", 27.55, 0.15, 27.95, 0.20),
                                    ("0.03", 26.10, 0.22, 27.00, 0.18)]:
        for arch, label, v, sd in [("res", "Res", res, res_sd), ("hacn", "H-ACN", h, h_sd)]:
            add(PaperItem(f"hacn/table1/hellaswag-p{p}-{arch}", P, "Table 1",
                          f"zero-shot HellaSwag accuracy (%) of {label} under character noise p = {p}", v, sd,
                          unit="%", higher_is_better=True, paper_setting=S_GPT + "; insert/delete/swap noise",
                          where=W_HACN_GPT, source="Sec. 3.4, Table 1",
                          note="The text points to 'Fig. 1' for this result; it is Table 1. Both versions agree."))

    # ---- Table 2, Figs. 5-6: initialisation and dynamics ------------------
    for mu, v in [("0.25", 90.2), ("0.75", 89.7), ("1", 88.7)]:
        add(PaperItem(f"hacn/table2/mixer-mu{mu}", P, "Table 2",
                      f"best final CIFAR-10 accuracy (%) of the H-ACN Mixer, alpha ~ N({mu}, 0.005)", v, unit="%",
                      higher_is_better=True, paper_setting=S_MIXER.replace("N(0.25, 0.005)", f"N({mu}, 0.005)"),
                      where=W_HACN_MIXER, source="Sec. 4, Table 2",
                      note="The first version runs the mu labels onto one line; the later version has one "
                           "row per mu and the same values."))
    add(PaperItem("hacn/fig5/gamma-vs-init-mean", P, "Fig. 5", "Gamma over training for alpha ~ N(mu, 0.005)", None,
                  paper_setting=S_MIXER, where=W_HACN_MIXER, source="Sec. 4, Fig. 5",
                  note="Larger (ResNet-like) mu keeps Gamma higher (denser connectivity) throughout training, and "
                       "ends with worse accuracy (Table 2)."))
    add(PaperItem("hacn/fig6a/convergence-distance", P, "Fig. 6a",
                  "convergence distance Delta_t = ||a_T - a_t||_2 during training", None, paper_setting=S_MIXER,
                  where=W_HACN_MIXER, source="Sec. 4, Fig. 6a",
                  note="Delta_t falls fast early and flattens around 60% of training, like Gamma."))
    add(PaperItem("hacn/fig6b/gamma-evolution", P, "Fig. 6b", "Gamma during training", None, paper_setting=S_MIXER,
                  where=W_HACN_MIXER, source="Sec. 4, Fig. 6b",
                  note="Gamma grows rapidly early, then stabilises or declines slightly around the 60% mark."))
    for slug, label, setting, where, v in [
        ("gpt2-owt2", "GPT-2 on OWT-2", S_GPT, W_HACN_GPT, 95.0),
        ("mixer-cifar10", "MLP-Mixer on CIFAR-10", S_MIXER, W_HACN_MIXER, 92.0),
    ]:
        add(PaperItem(f"hacn/sec4/alpha-correlation-{slug}", P, "Sec. 4",
                      f"average Pearson correlation (%) of converged a across independent runs, {label}", v,
                      unit="%", higher_is_better=True, paper_setting=setting, where=where,
                      source="Sec. 4, 'Robustness of initialization'"))

    # ---- Table 3: Gamma vs task difficulty --------------------------------
    for ds, label, setting, v in [("cifar2", "CIFAR-2", S_MIXER + "; 2 classes", 0.326),
                                  ("cifar10", "CIFAR-10", S_MIXER, 0.428),
                                  ("imagenet", "ImageNet", S_VIT, 0.930)]:
        add(PaperItem(f"hacn/table3/{ds}-gamma", P, "Table 3", f"total connectivity strength Gamma on {label}", v,
                      unit="Gamma", paper_setting=setting, where=W_HACN_TASK, source="Sec. 4, Table 3",
                      note="Claim: Gamma increases with task difficulty (number of classes)."))

    # ---- Fig. 7 (App. B) ---------------------------------------------------
    add(PaperItem("hacn/fig7/vs-denseformer-densenet", P, "Fig. 7",
                  "layer-wise accuracy / training of H-ACN vs DenseFormer-style and DenseNet-style Mixers", None,
                  higher_is_better=True, paper_setting=S_MIXER + "; DenseNet-style mixer has 10 layers",
                  where=W_HACN_MIXER, source="App. B.1, Fig. 7",
                  note="H-ACN is on par with ResNet at the same training speed and above all other architectures, "
                       "with strong auto-compression."))
    add(PaperItem("hacn/fig7/extra-parameters", P, "Fig. 7", "extra parameters of a 16-layer H-ACN Mixer over a ResNet",
                  16.0, unit="parameters", paper_setting="analytic (one a_i per layer, L = 16)", where=W_EXACT,
                  source="App. B.1", note="'only 16 extra parameters' (one residual weight per layer)."))

    # ---- Tables 4-5: GPT-2 configuration ----------------------------------
    add(PaperItem("hacn/table4/gpt2-parameters", P, "Table 4", "number of parameters of the GPT-2 model", 208.54,
                  unit="M parameters", paper_setting="24 layers, 12 heads, d=768, vocab 50304, seq 256, RoPE",
                  where=W_EXACT, source="App. A, Table 4",
                  note="Checkable by counting parameters; the main text says '~210M'. Counting conventions "
                       "(tied embeddings, a_i, DepthLN scalars) can move the last digits."))
    add(PaperItem("hacn/table5/gpt2-training-config", P, "Table 5", "GPT-2 training configuration", None,
                  paper_setting=S_GPT, where=W_HACN_GPT, source="App. A, Table 5",
                  note="Settings, not results: batch 128, 4 accumulation steps, 240,000 iterations, lr 0.001, "
                       "warmup 5%, weight decay 0.01, betas (0.9, 0.95), cosine, AdamW, clip 1.0, bfloat16."))

    # ---- Tables 6-7 (App. D): ablations on PG-19 --------------------------
    for slug, label, v, sd in [
        ("n0.15-0.01", "N(0.15, 0.01)", 19.73, 0.15),
        ("n0.25-0.01", "N(0.25, 0.01)", 19.25, 0.03),
        ("n0.15-0.005", "N(0.15, 0.005)", 19.64, 0.04),
        ("n0.25-0.005", "N(0.25, 0.005)", 19.22, 0.02),
        ("half-layers", "half layers: N(0.4, 0.005) / N(0.15, 0.005)", 19.48, 0.05),
        ("exp-decay", "exp. decay: N(0.25, 0.005) -> N(0.1, 0.005)", 20.05, 0.04),
    ]:
        add(PaperItem(f"hacn/table6/init-{slug}", P, "Table 6",
                      f"validation perplexity of H-ACN GPT-2 with alpha init {label}", v, sd, unit="perplexity",
                      higher_is_better=False, paper_setting=S_GPT_ABL, where=W_HACN_PG19,
                      source="App. D, Table 6",
                      note="Best: N(0.25, 0.005). The rows with sigma = 0.01 reappear in Table 7 (with DepthLN)."))
    for slug, label, v, sd in [("n0.15-0.01", "N(0.15, 0.01)", 20.5, 0.2),
                               ("n0.25-0.01", "N(0.25, 0.01)", 19.47, 0.08)]:
        add(PaperItem(f"hacn/table7/init-{slug}-no-depthln", P, "Table 7",
                      f"validation perplexity of H-ACN GPT-2, alpha init {label}, without DepthLN", v, sd,
                      unit="perplexity", higher_is_better=False, paper_setting=S_GPT_ABL, where=W_HACN_PG19,
                      source="App. D, Table 7",
                      note=f"The 'with DepthLN' row of Table 7 is item hacn/table6/init-{slug}; DepthLN should "
                           "lower perplexity."))
    add(PaperItem("hacn/fig9/connectivity-evolution", P, "Fig. 9", "evolution of C during GPT-2 training on PG-19",
                  None, paper_setting=S_GPT_PG19, where=W_HACN_PG19, source="App. E, Fig. 9",
                  note="Modules form sequentially (the first two first, then the last); the structure is largely "
                       "set by 50-60% of training."))

    # ---- later version only: App. H (Table 8) and App. I (Fig. 10) ----
    for slug, label, v, sd in [
        ("hacn-mu0.25", "H-ACN (mu = 0.25)", 19.79, 0.015),
        ("res", "Res", 19.84, 0.01),
        ("hacn-mu0.5", "H-ACN (mu = 0.5)", 19.97, 0.01),
        ("hacn-mu0.75", "H-ACN (mu = 0.75)", 20.00, 0.01),
        ("hacn-mu1.0", "H-ACN (mu = 1.0)", 19.93, 0.005),
        ("hacn-no-long-mu1.0", "H-ACN w/o long (mu = 1.0)", 19.76, 0.01),
        ("hacn-no-long-mu0", "H-ACN w/o long (mu = 0)", 19.80, 0.01),
        ("denseformer", "DenseFormer", 19.74, 0.015),
        ("layercomb-res-init", "LayerComb (Res-init)", 19.63, 0.03),
        ("layercomb-acn-init", "LayerComb (ACN-init)", 19.39, 0.02),
    ]:
        add(PaperItem(f"hacn/table8/{slug}", P, "Table 8", f"validation perplexity of {label}", v, sd,
                      unit="perplexity", higher_is_better=False,
                      paper_setting="GPT-2 24L (dataset not stated; values sit near the OWT-2 perplexities)",
                      where=W_HACN_GPT, source="App. H, Table 8 (later version only)",
                      note="Only in the later version of the paper; the text calls it 'Table 6'. "
                           "O(L) models: H-ACN/Res; O(L^2): DenseFormer, LayerComb."))
    add(PaperItem("hacn/apph/res-init-converged-alphas", P, "App. H",
                  "converged a_i of a GPT-2 H-ACN initialised at a = 1 (ResNet regime)", None,
                  paper_setting=S_GPT, where=W_HACN_GPT, source="App. H (later version only)",
                  note="Claim: from a ResNet init the a_i stay close to 1. Printed values (layers 1-24): 0.99, 0.62, "
                       "1.00, 1.00, 0.95, 0.95, 0.98, 0.93, 0.94, 0.92, 0.94, 0.93, 0.90, 0.90, 0.94, 0.95, 0.94, "
                       "0.95, 0.92, 0.94, 0.96, 1.00, 1.00, 1.00."))
    add(PaperItem("hacn/fig10/vit-finetune-depth", P, "Fig. 10",
                  "layer-wise accuracy after fine-tuning the ImageNet ViTs on CIFAR-10", None,
                  paper_setting=S_VIT + "; fine-tuned on CIFAR-10", where=W_HACN_VIT,
                  source="App. I, Fig. 10 (later version only)",
                  note="H-ACN stops relying on its top three layers for the easier task; they can be pruned with "
                       "negligible accuracy loss."))
    return out


def _awnn() -> list[PaperItem]:
    """AWNN items: Eqs. 11-15/19-20, Figs. 1-11, Tables 1-5 and App. D."""
    P = AWNN
    out: list[PaperItem] = []
    add = out.append

    # ---- analytic ----------------------------------------------------------
    add(PaperItem("awnn/eq12/discretized-exponential", P, "Eq. 12",
                  "discretised exponential f(x; lambda) = e^{-lambda x} - e^{-lambda (x+1)}", None,
                  paper_setting="analytic", where=W_EXACT, source="Sec. 3, Eq. 12; Fig. 1 (middle)",
                  note="A probability distribution over the naturals (sums to 1), strictly decreasing in x: the "
                       "soft importance order of neurons."))
    add(PaperItem("awnn/eq11/quantile-width", P, "Eq. 11", "truncated width D = quantile of f at k", None,
                  paper_setting="analytic", where=W_EXACT, source="Sec. 3, Eq. 11; Fig. 1 (middle)",
                  note="D grows as the rate falls; with the CDF 1 - e^{-lambda(x+1)}, D ~ -ln(1-k)/lambda."))
    for slug, rate, v, src, our in [
        ("tabular-rate0.01", "0.01", 256.0, "App. C.1", 230.3),
        ("image-rate0.02", "0.02", 128.0, "App. C.2", 115.1),
        ("multi30k-rate0.004", "0.004", 512.0, "App. C.3", 575.6),
    ]:
        add(PaperItem(f"awnn/eq11/start-width-{slug}", P, "Eq. 11",
                      f"starting width at k = 0.9 for exponential rate {rate}", v, unit="neurons",
                      paper_setting=f"k = 0.9, rate {rate}", where=W_EXACT, source=src,
                      note=f"The paper says 'approximately {int(v)}'. Our own arithmetic (not the paper's): "
                           f"-ln(0.1)/{rate} = {our}, so the paper's figure is a loose rounding."))
    add(PaperItem("awnn/eq13/elbo", P, "Eq. 13",
                  "training objective: width prior + weight prior + N/M-scaled likelihood",
                  None, paper_setting="analytic", where=W_EXACT, source="Sec. 3, Eq. 13",
                  note="log p(nu)/q(nu) + sum log p(rho)/q(rho) + sum_i log p(y_i | nu, rho, x_i); the predictive term "
                       "is rescaled by N/M for mini-batches of size M."))
    add(PaperItem("awnn/eq14/rescaled-activation", P, "Eq. 14", "rescaled activation h_j = sigma(W x)_j f(j; nu)",
                  None, paper_setting="analytic", where=W_EXACT, source="Sec. 3.1, Eq. 14; Fig. 1 (right)",
                  note="Neuron j's activation is multiplied by its importance f(j); later neurons matter less."))
    add(PaperItem("awnn/eq15/kaiming-plus-relu", P, "Eq. 15", "kaiming+ weight variance for ReLU", None,
                  paper_setting="analytic", where=W_EXACT, source="Sec. 3.2, Theorem 3.1, Eqs. 15, 20, 41",
                  note="Var[w] = 2 / sum_j f(j)^2 keeps activation variance constant across layers at init. "
                       "Eqs. 19-20 index f by layer l+1 while the derivation (Eqs. 27-28, 40-41) uses the previous "
                       "layer; identical when all layers share the same rate."))
    add(PaperItem("awnn/eq19/kaiming-plus-tanh", P, "Eq. 19", "kaiming+ weight variance for sigma'(0) ~ 1 (tanh-like)",
                  None, paper_setting="analytic", where=W_EXACT, source="App. A, Eqs. 19, 28",
                  note="Var[w] = 1 / sum_j f(j)^2."))
    add(PaperItem("awnn/sec3.3/training-overhead", P, "Sec. 3.3",
                  "training-time cost of a naive AWNN relative to a fixed network", 10.0, unit="x",
                  higher_is_better=False, paper_setting="naive implementation", where="CPU benchmark",
                  source="Sec. 3.3", note="'up to 10x cost'; an upper bound, not a measurement of one setting."))

    # ---- figures -----------------------------------------------------------
    figs = [
        ("fig1", "Fig. 1", "graphical-model", "graphical model, importance distribution f, rescaled activations",
         "analytic", W_EXACT, "Sec. 3, Fig. 1",
         "Illustration: f is decreasing, D is its k-quantile, activations are rescaled by f(j)."),
        ("fig2", "Fig. 2", "activation-variance",
         "activation variance per layer, kaiming vs kaiming+ (ours: Var[alpha^5] / Var[alpha^1] under kaiming+)",
         "5-layer ReLU AWNN MLP at initialisation", W_EXACT, "Sec. 3.2, Fig. 2",
         "With standard kaiming the activations of deeper layers collapse towards 0; with kaiming+ their variance "
         "stays constant as Theorem 3.1 predicts."),
        ("fig3", "Fig. 3 (left)", "width-vs-difficulty", "learned total width on DoubleMoon, Spiral, SpiralHard",
         S_AWNN_TAB, W_AWNN_TAB, "Sec. 5.1, Fig. 3",
         "Learned width grows with task difficulty (DoubleMoon < Spiral < SpiralHard); a multi-layer MLP on "
         "SpiralHard needs less total width than a single-layer one."),
        ("fig3", "Fig. 3 (right)", "convergence", "test accuracy vs epochs, fixed vs AWNN",
         S_AWNN_TAB, W_AWNN_TAB, "Sec. 5.1, Fig. 3",
         "AWNN reaches perfect test accuracy in a comparable number of epochs on DoubleMoon and Spiral and "
         "converges faster on SpiralHard."),
        ("fig4", "Fig. 4 (left)", "width-vs-batch-size", "learned width over training for several batch sizes",
         S_AWNN_TAB + "; SpiralHard", W_AWNN_TAB, "Sec. 5.2, Fig. 4",
         "Smaller batches are noisier but all batch sizes converge to a similar width."),
        ("fig4", "Fig. 4 (right)", "width-vs-start-rate", "learned width for several starting rates nu",
         S_AWNN_TAB + "; SpiralHard", W_AWNN_TAB, "Sec. 5.2, Fig. 4",
         "With ReLU6 (bounded) the width converges to the same value from different starting rates."),
        ("fig5", "Fig. 5 (right)", "accuracy-under-compression", "test accuracy during width annealing",
         S_AWNN_TAB + "; SpiralHard, ReLU6, prior N(0.05, 1) from epoch 1000 annealed to std 0.1 at 2500",
         W_AWNN_TAB, "Sec. 5.3, Fig. 5", "Accuracy does not degrade while the width shrinks."),
        ("fig6", "Fig. 6 (right)", "activation-distribution", "distribution of neurons' activations on Spiral test",
         S_AWNN_TAB + "; Spiral", W_AWNN_TAB, "Sec. 5.4, Fig. 6",
         "Per-neuron activation ranges follow an exponential-like decay with the neuron index."),
        ("fig7", "Fig. 7 (left)", "activation-variance",
         "activation variance per layer, kaiming vs kaiming+ (ours: Var[alpha^5] / Var[alpha^1] under kaiming)",
         "5-layer ReLU AWNN MLP at initialisation", W_EXACT, "App. A, Fig. 7",
         "Same as Fig. 2: activation variance collapses with depth under kaiming, stays constant under kaiming+."),
        ("fig7", "Fig. 7 (right)", "spiralhard-kaiming-convergence", "SpiralHard training with kaiming vs kaiming+",
         S_AWNN_TAB + "; SpiralHard", W_AWNN_TAB, "App. A, Fig. 7",
         "Without kaiming+ the deep ReLU AWNN hardly converges on SpiralHard."),
        ("fig8", "Fig. 8", "synthetic-datasets", "the DoubleMoon, Spiral and SpiralHard datasets",
         "2-D binary classification, 2500/2500/5000 samples", "CPU, exact (generated)", "App. B, Fig. 8",
         "Three 2-D binary tasks of increasing difficulty (generator code is in the paper's supplement only)."),
        ("fig9", "Fig. 9", "image-width-vs-difficulty", "learned width and convergence on MNIST, CIFAR10, CIFAR100",
         S_AWNN_IMG, W_AWNN_MNIST + "; CIFAR: " + W_AWNN_CIFAR, "App. E, Fig. 9",
         "Learned width increases MNIST < CIFAR10 < CIFAR100; convergence in as many epochs as the fixed "
         "ResNet-20, with jumps at the learning-rate steps."),
        ("fig10", "Fig. 10", "nonlinearity-ablation", "learned width per activation, batch size and starting rate",
         S_AWNN_TAB + "; SpiralHard", W_AWNN_TAB, "App. F, Fig. 10",
         "ReLU6 converges to the same width in all configurations; ReLU and LeakyReLU drift down more slowly."),
        ("fig11", "Fig. 11", "graph-width-per-layer", "learned neurons per layer (1-5) of GIN on NCI1 and REDDIT-B",
         S_AWNN_GRAPH, W_AWNN_NCI1 + "; " + W_AWNN_REDDIT, "App. G, Fig. 11",
         "Similar per-layer width trends across the selected configurations."),
    ]
    for slug, item_, qslug, quantity, setting, where, src, note in figs:
        sub = "-right" if "(right)" in item_ else ("-left" if "(left)" in item_ else "")
        add(PaperItem(f"awnn/{slug}{sub}/{qslug}", P, item_, quantity, None, paper_setting=setting, where=where,
                      source=src, note=note))
    s_anneal = S_AWNN_TAB + "; SpiralHard, ReLU6, prior N(0.05, 1) from epoch 1000 annealed to std 0.1 at 2500"
    add(PaperItem("awnn/fig5-left/width-before-annealing", P, "Fig. 5 (left)",
                  "total width before the annealed width prior", 800.0, unit="neurons", paper_setting=s_anneal,
                  where=W_AWNN_TAB, source="Sec. 5.3, Fig. 5", note="'approximately 800 neurons'."))
    add(PaperItem("awnn/fig5-left/width-after-annealing", P, "Fig. 5 (left)",
                  "total width after the annealed width prior", 300.0, unit="neurons", paper_setting=s_anneal,
                  where=W_AWNN_TAB, source="Sec. 5.3, Fig. 5",
                  note="'to 300'; the caption says the width is reduced by more than 50%."))
    add(PaperItem("awnn/fig6-left/truncation-width", P, "Fig. 6 (left)", "hidden width of the truncated Spiral MLP",
                  83.0, unit="neurons", paper_setting=S_AWNN_TAB + "; Spiral", where=W_AWNN_TAB,
                  source="Sec. 5.4, Fig. 6", note="The trained AWNN MLP that is truncated post hoc."))
    add(PaperItem("awnn/fig6-left/lossless-truncation", P, "Fig. 6 (left)",
                  "fraction of last neurons removable after training without accuracy loss", 30.0, unit="%",
                  higher_is_better=True, paper_setting=S_AWNN_TAB + "; Spiral", where=W_AWNN_TAB,
                  source="Sec. 5.4, Fig. 6",
                  note="Cut by 30% without loss of accuracy, then smooth degradation as more neurons are removed."))

    # ---- Table 1 ------------------------------------------------------------
    # (dataset slug, label, setting, where, fixed acc, std, awnn acc, std, fixed width, awnn width, std)
    rows = [
        ("doublemoon", "DoubleMoon", S_AWNN_TAB, W_AWNN_TAB, 100.0, 0.0, 100.0, 0.0, 8.0, 8.1, 2.8),
        ("spiral", "Spiral", S_AWNN_TAB, W_AWNN_TAB, 99.5, 0.5, 99.8, 0.1, 16.0, 65.9, 8.7),
        ("spiralhard", "SpiralHard", S_AWNN_TAB, W_AWNN_TAB, 98.0, 2.0, 100.0, 0.0, 32.0, 227.4, 32.4),
        ("mnist", "MNIST", S_AWNN_IMG, W_AWNN_MNIST, 99.6, 0.1, 99.7, 0.0, None, 19.4, 4.8),
        ("cifar10", "CIFAR10", S_AWNN_IMG, W_AWNN_CIFAR, 91.4, 0.2, 91.4, 0.2, None, 80.1, 12.4),
        ("cifar100", "CIFAR100", S_AWNN_IMG, W_AWNN_CIFAR, 66.5, 0.4, 63.1, 4.0, 256.0, 161.9, 57.8),
        ("nci1", "NCI1", S_AWNN_GRAPH, W_AWNN_NCI1, 80.0, 1.4, 80.0, 1.1, None, 731.3, 128.2),
        ("reddit-b", "REDDIT-B", S_AWNN_GRAPH, W_AWNN_REDDIT, 87.0, 4.4, 90.2, 1.3, None, 793.6, 574.0),
        ("multi30k", "Multi30k", S_AWNN_MT, W_AWNN_MT, 1.43, 0.4, 1.51, 0.2, 24576.0, 123.2, 187.9),
    ]
    for slug, label, setting, where, fa, fs, aa, as_, fw, aw, aws in rows:
        mt = slug == "multi30k"
        metric = "test cross-entropy loss" if mt else "test accuracy (%)"
        unit = "cross-entropy" if mt else "%"
        extra = {
            "doublemoon": "", "spiral": "", "spiralhard": "",
            "cifar100": "AWNN's mean is pulled down by one run that did not converge (Sec. 5).",
            "nci1": "Fixed values are the published GIN results of Errica et al. (2020).",
            "reddit-b": "Fixed values are the published GIN results of Errica et al. (2020).",
            "multi30k": "(lower is better)",
        }.get(slug, "")
        add(PaperItem(f"awnn/table1/{slug}-fixed-{'loss' if mt else 'accuracy'}", P, "Table 1",
                      f"{metric} of the fixed-width model on {label}", fa, fs, unit=unit, higher_is_better=not mt,
                      paper_setting=setting + "; fixed-width baseline chosen by grid search",
                      where=where, source="Sec. 5, Table 1", note=extra))
        add(PaperItem(f"awnn/table1/{slug}-awnn-{'loss' if mt else 'accuracy'}", P, "Table 1",
                      f"{metric} of AWNN on {label}", aa, as_, unit=unit, higher_is_better=not mt,
                      paper_setting=setting, where=where, source="Sec. 5, Table 1", note=extra))
        if fw is None:
            fnote = ("The paper writes 'Linear': model selection picked a linear classifier (width 0, App. C.2)."
                     if slug in ("mnist", "cifar10") else
                     "The paper writes '(96-320)': the range tried in the published baselines; the chosen width "
                     "is unknown.")
        else:
            fnote = "Width chosen by grid search (no std)."
            if mt:
                fnote += " 24576 = 12 FFNs x 2048."
        add(PaperItem(f"awnn/table1/{slug}-fixed-width", P, "Table 1",
                      f"total width of the MLP layers of the fixed model on {label}", fw, unit="neurons",
                      paper_setting=setting, where=where, source="Sec. 5, Table 1", note=fnote))
        add(PaperItem(f"awnn/table1/{slug}-awnn-width", P, "Table 1",
                      f"learned total width of the adaptive MLP layers of AWNN on {label}", aw, aws, unit="neurons",
                      paper_setting=setting, where=where, source="Sec. 5, Table 1",
                      note="Mean (std) over the 10 final runs."))
    add(PaperItem("awnn/sec5/multi30k-ffn-parameter-ratio", P, "Table 1",
                  "ratio of FFN parameters, fixed Transformer over AWNN Transformer, Multi30k", 200.0, unit="x",
                  higher_is_better=True, paper_setting=S_AWNN_MT, where=W_AWNN_MT, source="Sec. 5 and Sec. 6",
                  note="'200x parameters less' at a statistically comparable loss; 24576 / 123.2 = 199.5 from "
                       "Table 1 widths."))

    # ---- Table 2: dataset statistics (sample counts) ----------------------
    for slug, label, n, where, split in [
        ("doublemoon", "DoubleMoon", 2500, "CPU, exact (generated)", "1750/250/500"),
        ("spiral", "Spiral", 2500, "CPU, exact (generated)", "1750/250/500"),
        ("spiralhard", "SpiralHard", 5000, "CPU, exact (generated)", "3500/500/1000"),
        ("mnist", "MNIST", 70000, "CPU, exact (offline MNIST)", "53000/7000/10000"),
        ("cifar10", "CIFAR10", 60000, W_AWNN_CIFAR, "44000/6000/10000"),
        ("cifar100", "CIFAR100", 60000, W_AWNN_CIFAR, "44000/6000/10000"),
        ("nci1", "NCI1", 4110, "CPU, exact (offline NCI1)", "3288/411/411"),
        ("reddit-b", "REDDIT-B", 2000, W_AWNN_REDDIT, "1800/100/100"),
        ("multi30k", "Multi30k", 31000, W_AWNN_MT, "29000/1000/1000"),
    ]:
        add(PaperItem(f"awnn/table2/{slug}-samples", P, "Table 2", f"number of samples of {label}", float(n),
                      unit="samples", paper_setting="dataset statistics", where=where, source="App. B, Table 2",
                      note=f"Outer split TR/VL/TE {split}."))
    add(PaperItem("awnn/table2/nci1-features", P, "Table 2", "number of node features of NCI1", 37.0,
                  unit="features", paper_setting="dataset statistics", where="CPU, exact (offline NCI1)",
                  source="App. B, Table 2"))

    # ---- Tables 3-5: hyper-parameters (settings, not results) -------------
    add(PaperItem("awnn/table3/tabular-config", P, "Table 3", "hyper-parameters tried on the tabular datasets", None,
                  paper_setting=S_AWNN_TAB, where=W_AWNN_TAB, source="App. C.1, Table 3",
                  note="Settings: epochs 500/1000/5000; hidden layers 1 or [1, 2, 4]; widths [8, 16, 24, 128, 256]; "
                       "ReLU/LeakyReLU/ReLU6; Adam lr [0.1, 0.01] (MLP) or 0.01 (AWNN); k 0.9; rate 0.01; "
                       "sigma_theta [1, 10]; 180 fixed vs 18 AWNN configurations."))
    add(PaperItem("awnn/table4/image-config", P, "Table 4", "hyper-parameters on the image datasets", None,
                  paper_setting=S_AWNN_IMG, where=W_AWNN_MNIST + "; CIFAR: " + W_AWNN_CIFAR,
                  source="App. C.2, Table 4",
                  note="Settings: batch 128, 200 epochs, head width [0, 32, 128, 256, 512], SGD lr 0.1 wd 1e-4 "
                       "momentum 0.9, lr x0.1 at epochs 50/100/150, k 0.9, rate 0.02, sigma_theta 1."))
    add(PaperItem("awnn/table5/graph-config", P, "Table 5", "hyper-parameters of AWNN-GIN on the graph datasets",
                  None, paper_setting=S_AWNN_GRAPH, where=W_AWNN_NCI1 + "; " + W_AWNN_REDDIT,
                  source="App. C.4, Table 5",
                  note="Settings: batch [32, 128], 1000 epochs, patience 500, 1/2/4 graph conv layers, sum/mean "
                       "pooling, Adam lr 0.01, k 0.9, rate 0.02, sigma_theta 10 (12 configurations). The table "
                       "header says 'NC11' (a typo for NCI1)."))

    # ---- App. D: Fixed+ -----------------------------------------------------
    for slug, label, setting, where, v, sd in [
        ("spiral", "Spiral", S_AWNN_TAB, W_AWNN_TAB, 100.0, 0.1),
        ("spiralhard", "SpiralHard", S_AWNN_TAB, W_AWNN_TAB, 83.2, 17.0),
        ("reddit-b", "REDDIT-B", S_AWNN_GRAPH, W_AWNN_REDDIT, 90.7, 1.4),
    ]:
        add(PaperItem(f"awnn/appd/{slug}-fixed-plus-accuracy", P, "App. D",
                      f"test accuracy (%) of the fixed baseline retrained at AWNN's learned width ('Fixed+') on "
                      f"{label}", v, sd, unit="%", higher_is_better=True, paper_setting=setting, where=where,
                      source="App. D, unnumbered table",
                      note="The table's 'Fixed' and 'AWNN' rows repeat Table 1."))
    return out


def _gates() -> list[PaperItem]:
    """Residual Gates items: Sec. 2 rules, Figs. 1-7, Tables 1-6."""
    P = GATES
    out: list[PaperItem] = []
    add = out.append

    # ---- analytic ----------------------------------------------------------
    add(PaperItem("gates/sec2.2/gated-plain-layer", P, "Sec. 2.2", "Gated PlainNet layer u = g(k) f(x) + (1 - g(k)) x",
                  None, paper_setting="analytic", where=W_EXACT, source="Sec. 2.2",
                  note="k = 1 recovers the original layer; with g = ReLU any k <= 0 gives the identity; every other "
                       "k is a linear combination of the two."))
    add(PaperItem("gates/sec2.2/gated-resnet-layer", P, "Sec. 2.2", "Gated ResNet layer u = g(k) f_r(x) + x", None,
                  paper_setting="analytic", where=W_EXACT, source="Sec. 2.2",
                  note="Substituting f = f_r + x into the gated rule cancels (1 - g(k)): the shortcut is unaltered; "
                       "k = 0 is the identity, k = 1 the original residual layer."))
    add(PaperItem("gates/sec2.1/init-distance", P, "Sec. 2.1",
                  "expected squared distance of initial weights from W = 0", None, paper_setting="analytic",
                  where=W_EXACT, source="Sec. 2.1",
                  note="E[(W_o - 0)^2] = Var[W_o]: per weight O(1/n) under Glorot/He init, O(n) in total for an "
                       "n x n layer, while a gated layer needs one scalar k to reach the identity."))
    for fig, slug, quantity, note in [
        ("fig1", "gated-plain-diagram", "diagram of the gated shortcut on a plain layer",
         "The shortcut is controlled by one scalar k (vs a tensor in Highway networks)."),
        ("fig2", "gated-resnet-diagram", "diagram of the gated residual layer",
         "g(k) scales the residual branch only; the identity path stays unchanged."),
        ("fig3", "identity-layer", "adding a layer initialised at W = I",
         "ReLU(<x, I>) = x for x >= 0, so adding such a layer keeps the function."),
    ]:
        add(PaperItem(f"gates/{fig}/{slug}", P, f"Fig. {fig[3:]}", quantity, None, paper_setting="analytic",
                      where=W_EXACT, source=f"Sec. {'1' if fig != 'fig3' else '2.1'}, Fig. {fig[3:]}", note=note))
    add(PaperItem("gates/sec3.2/extra-parameters-resnet5", P, "Table 3",
                  "extra parameters of the gated ResNet with n = 5", 15.0, unit="parameters",
                  paper_setting="ResNet n = 5 (3 stages x 5 blocks)", where=W_EXACT, source="Sec. 3.2",
                  note="One k per residual block."))
    add(PaperItem("gates/sec3.2/extra-parameters-wrn-4-10", P, "Table 3",
                  "extra parameters of the gated Wide ResNet (4,10)", 12.0, unit="parameters",
                  paper_setting="WRN n = 4, widen 10 (3 stages x 4 blocks)", where=W_EXACT, source="Sec. 3.2",
                  note="One k per residual block."))

    # ---- Table 1 and Table 2: MNIST -----------------------------------------
    archs = ("plain", "resnet", "gated-plain", "gated-resnet")
    labels = {"plain": "Plain", "resnet": "ResNet", "gated-plain": "Gated PlainNet", "gated-resnet": "Gated ResNet"}
    table1 = {
        2: (2.29, 2.20, 2.04, 2.17),
        10: (2.22, 1.64, 1.78, 1.60),
        20: (2.21, 1.61, 1.59, 1.57),
        50: (60.37, 1.62, 1.36, 1.48),
        100: (90.20, 1.50, 1.29, 1.26),
    }
    for d, values in table1.items():
        for arch, v in zip(archs, values):
            note = ""
            if arch == "plain" and d >= 50:
                note = "Plain networks fail to converge at d = 50 and d = 100."
            add(PaperItem(f"gates/table1/mnist-d{d}-{arch}", P, "Table 1",
                          f"test error (%) of {labels[arch]}, d = {d}, MNIST", v, unit="%", higher_is_better=False,
                          paper_setting=f"{S_GATES_MNIST}; d = {d} (depth d + 2)", where=W_GATES_MNIST,
                          source="Sec. 3.1, Table 1", note=note))
    table2 = {2: (10.57, 5.58), 10: (1.19, 2.54), 20: (0.64, 1.73), 50: (0.46, 1.04), 100: (0.41, 0.67)}
    for d, values in table2.items():
        for arch, v in zip(("gated-plain", "gated-resnet"), values):
            add(PaperItem(f"gates/table2/mnist-d{d}-{arch}-mean-k", P, "Table 2",
                          f"mean final k of {labels[arch]}, d = {d}, MNIST", v, unit="k",
                          paper_setting=f"{S_GATES_MNIST}; d = {d} (depth d + 2)", where=W_GATES_MNIST,
                          source="Sec. 3.1, Table 2",
                          note="Mean k falls with depth. A gated plain layer suppresses its branch for k < 0.5, a "
                               "gated residual layer for k < 1."))
    add(PaperItem("gates/fig4/mnist-train-loss", P, "Fig. 4", "training loss of plain/ResNet/gated nets, d in 2..100",
                  None, higher_is_better=False, paper_setting=S_GATES_MNIST, where=W_GATES_MNIST,
                  source="Sec. 3.1, Fig. 4",
                  note="The gap between gated and non-gated curves grows with depth; plain networks fail to train at "
                       "d = 50 and 100."))
    add(PaperItem("gates/fig5-left/k-per-block", P, "Fig. 5 (left)",
                  "final k of each of the 50 blocks of the d = 100 Gated ResNet", None,
                  paper_setting=S_GATES_MNIST + "; d = 100", where=W_GATES_MNIST, source="Sec. 3.1, Fig. 5",
                  note="Blocks near the middle of the network have smaller k than the first and last ones."))
    add(PaperItem("gates/fig5-right/layer-removal", P, "Fig. 5 (right)",
                  "test accuracy (%) vs number of removed residual blocks, d = 100", None, higher_is_better=True,
                  paper_setting=S_GATES_MNIST + "; d = 100", where=W_GATES_MNIST, source="Sec. 3.1, Fig. 5",
                  note="Gated ResNet keeps decent accuracy after half its layers are removed; greedy removal "
                       "(smallest k first) is slightly better than random; ResNet degrades after a few removals."))
    add(PaperItem("gates/fig5-right/retained-performance-half-removed", P, "Fig. 5 (right)",
                  "share (%) of its performance a Gated ResNet keeps after half its layers are randomly removed", 90.0,
                  unit="%", higher_is_better=True, paper_setting=S_GATES_MNIST + "; d = 100",
                  where=W_GATES_MNIST, source="Abstract; Sec. 3.1, Fig. 5",
                  note="'retains over 90% of its performance': a lower bound."))

    # ---- Tables 3-5: CIFAR ----------------------------------------------------
    table3_notes = {
        "original": "Original value as reported by He et al. (2015b) / Zagoruyko & Komodakis (2016).",
        "gated": "",
        "gated-kdecay": "k decay: weight decay also applied to k; it hurts in both models.",
    }
    for model, label, setting, vals in [
        ("resnet5", "ResNet (n = 5)", "pre-activation ResNet n = 5, CIFAR-10, wd 1e-4", (7.16, 6.67, 7.04)),
        ("wrn-4-10-dropout", "Wide ResNet (4,10) + Dropout", "WRN n = 4, widen 10, dropout 0.3, CIFAR-10, wd 5e-4",
         (3.89, 3.65, 3.74)),
    ]:
        for variant, vlabel, v in zip(("original", "gated", "gated-kdecay"),
                                      ("original", "gated", "gated with k decay"), vals):
            add(PaperItem(f"gates/table3/cifar10-{model}-{variant}", P, "Table 3",
                          f"test error (%) of {label}, {vlabel}, CIFAR-10", v, unit="%", higher_is_better=False,
                          paper_setting=f"{S_GATES_WRN}; {setting}",
                          where=W_GATES_CIFAR, source="Sec. 3.2, Table 3",
                          note=table3_notes[variant]))
    wrn_rows = [
        ("wrn-2-4", "Wide ResNet (2,4)", (5.02, 4.66), (24.03, 23.29)),
        ("wrn-4-10", "Wide ResNet (4,10)", (4.00, 3.82), (19.25, 18.89)),
        ("wrn-4-10-dropout", "Wide ResNet (4,10) + Dropout", (3.89, 3.65), (18.85, 18.27)),
        ("wrn-8-1", "Wide ResNet (8,1)", (6.43, 6.10), (29.89, 28.20)),
        ("wrn-6-10-dropout", "Wide ResNet (6,10) + Dropout", (3.80, 3.63), None),
    ]
    for model, label, c10, c100 in wrn_rows:
        for table, ds, vals in (("table4", "cifar10", c10), ("table5", "cifar100", c100)):
            if vals is None:
                continue
            for variant, v in zip(("original", "gated"), vals):
                note = "Original: as reported by Zagoruyko & Komodakis (2016)." if variant == "original" else ""
                if model == "wrn-4-10-dropout":
                    note = (note + " Same run as the Table 3/Table 6 row.").strip()
                add(PaperItem(f"gates/{table}/{ds}-{model}-{variant}", P, f"Table {table[-1]}",
                              f"test error (%) of {label}, {variant}, {ds.upper().replace('CIFAR', 'CIFAR-')}", v,
                              unit="%", higher_is_better=False,
                              paper_setting=f"{S_GATES_WRN}; WRN (n, widen) = {label[len('Wide ResNet '):]}",
                              where=W_GATES_CIFAR, source=f"Sec. 3.2, Table {table[-1]}", note=note))

    # ---- Table 6: comparison with the literature ----------------------------
    table6 = [
        ("nin", "Network in Network", 8.81, None),
        ("fitnet", "FitNet", 8.39, 35.04),
        ("highway", "Highway Neural Network", 7.76, 32.39),
        ("all-cnn", "All-CNN", 7.25, 33.71),
        ("resnet-110", "ResNet-110", 6.61, None),
        ("resnet-in-resnet", "ResNet in ResNet", 5.01, 22.90),
        ("stochastic-depth", "Stochastic Depth", 4.91, None),
        ("resnet-1001", "ResNet-1001", 4.62, 22.71),
        ("fractalnet", "FractalNet", 4.60, 23.73),
        ("wrn-4-10", "Wide ResNet (4,10)", 3.89, 18.85),
        ("densenet", "DenseNet", 3.74, 19.25),
        ("wide-gated-resnet-4-10-dropout", "Wide GatedResNet (4,10) + Dropout", 3.65, 18.27),
    ]
    for slug, label, c10, c100 in table6:
        ours = slug.startswith("wide-gated") or slug == "wrn-4-10"
        for ds, dlabel, v in (("c10", "CIFAR-10 (C10+)", c10), ("c100", "CIFAR-100 (C100+)", c100)):
            if v is None:
                continue
            if slug.startswith("wide-gated"):
                note = "The paper's headline result (abstract: 3.65% and 18.27%)."
            elif slug == "wrn-4-10":
                note = "The +Dropout WRN (4,10) (same values as Tables 4-5 'Wide ResNet (4,10) + Dropout')."
            else:
                note = "Literature baseline quoted in Table 6."
            add(PaperItem(f"gates/table6/{ds}-{slug}", P, "Table 6",
                          f"test error (%) of {label}, {dlabel}", v, unit="%", higher_is_better=False,
                          paper_setting="standard augmentation (crops and flips)" +
                          (f"; {S_GATES_WRN}" if ours else ""),
                          where=W_GATES_CIFAR if ours else W_LIT, source="Sec. 3.3, Table 6", note=note))
    add(PaperItem("gates/table6/wrn-4-10-parameters", P, "Table 6",
                  "parameters of Wide (Gated) ResNet (4,10)", 36.5, unit="M parameters",
                  paper_setting="WRN n = 4 (depth 28), widen 10, CIFAR-10 head", where=W_EXACT,
                  source="Sec. 3.3, Table 6",
                  note="Both the original and the gated model are listed at 36.5M (gates add 12 scalars)."))
    add(PaperItem("gates/fig6/k-per-block-wrn", P, "Fig. 6", "final k of each of the 12 blocks of Gated WRN (4,10)",
                  None, paper_setting=S_GATES_WRN + "; WRN (4,10), CIFAR-10", where=W_GATES_CIFAR,
                  source="Sec. 3.2 and 3.3, Fig. 6",
                  note="Lowest k at blocks 1, 5 and 9 (those that change the feature-map dimension); the largest k at "
                       "the last block (12). Sec. 3.3 refers to this figure as 'Table 6'."))
    add(PaperItem("gates/fig7/wrn-train-test-curves", P, "Fig. 7",
                  "train and test error (%) curves of Gated WRN (4,10) + dropout 0.3 on CIFAR-10/100", None,
                  higher_is_better=False, paper_setting=S_GATES_WRN + "; WRN (4,10), dropout 0.3",
                  where=W_GATES_CIFAR, source="Sec. 3.2, Fig. 7",
                  note="Optimisation behaves like the original model: the gates have no visible side effects."))
    return out


PAPER_ITEMS: tuple[PaperItem, ...] = tuple(_hacn() + _awnn() + _gates())
_BY_ID: dict[str, PaperItem] = {}
for _it in PAPER_ITEMS:
    if _it.id in _BY_ID:  # fail at import: a duplicate id would silently shadow a ledger row
        raise RuntimeError(f"duplicate PaperItem id {_it.id!r}")
    _BY_ID[_it.id] = _it
del _it


def items_for(paper: str) -> tuple[PaperItem, ...]:
    """All items of one paper (``"H-ACN"``, ``"AWNN"`` or ``"Residual Gates"``), in paper order.

    The id prefixes (``hacn``, ``awnn``, ``gates``) are accepted too.
    """
    by_prefix = {v: k for k, v in PAPER_PREFIX.items()}
    name = by_prefix.get(paper, paper)
    if name not in PAPERS:
        raise ValueError(
            f"paper={paper!r} is not one of the papers; allowed: {', '.join(PAPERS)} "
            f"(or the prefixes {', '.join(PAPER_PREFIX.values())})"
        )
    return tuple(it for it in PAPER_ITEMS if it.paper == name)


def item(id: str) -> PaperItem:  # noqa: A002 - the field is called id
    """The item with this id; a KeyError lists the closest ids when there is none."""
    try:
        return _BY_ID[id]
    except KeyError:
        close = difflib.get_close_matches(id, list(_BY_ID), n=5, cutoff=0.5)
        hint = f"; closest ids: {', '.join(close)}" if close else ""
        raise KeyError(f"no paper item with id {id!r}{hint}") from None


def as_records(paper: str | None = None) -> list[dict[str, Any]]:
    """Items as plain dicts (one per row), e.g. for ``pandas.DataFrame(as_records())``."""
    items = PAPER_ITEMS if paper is None else items_for(paper)
    return [dataclasses.asdict(it) for it in items]
