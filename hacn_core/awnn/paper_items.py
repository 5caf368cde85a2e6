"""The numbers of Adaptive Width Neural Networks (Errica et al.): every table and figure, as the paper prints them.

Coverage: Eqs. 11-15 and 19-20, Figs. 1-11, every cell of Table 1 (accuracy and total width, fixed
and AWNN, as separate items), the sample counts of Table 2, Tables 3-5 (settings), the "Fixed+"
table of App. D and the numbers the text quotes for Figs. 5-6.

Figures get ``paper_value=None`` and a ``note`` that states the claim they show,
which a run can check. This is the one place where the paper's numbers are typed: studies,
reports and the ledger read it from here (:func:`item`).
"""

from __future__ import annotations

from hacn_core.engine.items import W_EXACT, PaperItem, Place, item_lookup, place_items

PAPER = "AWNN"

# Where each item can run here (data, hardware, budget) and the paper's settings, reused by many items.
S_AWNN_GRAPH = "GIN with adaptive MLPs, protocol of Errica et al. (2020), rate 0.02, 10 runs"
S_AWNN_IMG = "ResNet-20 with adaptive classifier head, SGD lr 0.1, 200 epochs, rate 0.02, 10 runs"
S_AWNN_MT = "Transformer 6+6 layers, d=512, 8 heads, adaptive FFNs, rate 0.004, 10 runs"
S_AWNN_TAB = "MLP, Adam lr 0.01, k=0.9, rate 0.01, uninformative width prior, 10 runs"
W_AWNN_CIFAR = "download (CIFAR-10/100)"
W_AWNN_MNIST = "MNIST offline (GPU for full length)"
W_AWNN_MT = "download (Multi30k); offline smoke only"
W_AWNN_NCI1 = "NCI1 offline (CPU, reduced budget)"
W_AWNN_REDDIT = "download (REDDIT-BINARY)"
W_AWNN_TAB = "CPU, full paper settings"


def _items() -> list[PaperItem]:
    """AWNN items: Eqs. 11-15/19-20, Figs. 1-11, Tables 1-5 and App. D."""
    P = PAPER
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


# Where the book shows each item (id or id prefix -> chapter, section; the tests that check it exactly,
# or the experiments whose stored runs a drawn figure reads). Items of no chapter yet are not listed.
CH1, CH2, CH3, CH4 = "awnn_01_width", "awnn_02_tabular", "awnn_03_compress", "awnn_04_ablations"
WIDTH = "Importance and width (Eqs. 11, 12, 14; Fig. 1)"
KAIMING = "Why a deep AWNN needs kaiming+ (Theorem 3.1; Fig. 2 and Fig. 7, left)"
T_AWNN = "tests/test_awnn.py::"
TABULAR = ("doublemoon", "spiral", "spiralhard")
PLACES: dict[str, Place] = {
    "awnn/eq12": Place(CH1, WIDTH, (T_AWNN + "test_discretized_exponential_is_a_distribution",
                                    T_AWNN + "test_importances_match_hand_computation")),
    "awnn/eq11/quantile-width": Place(CH1, WIDTH, (T_AWNN + "test_quantile_width_holds_mass_k",
                                                   T_AWNN + "test_quantile_width_exact_boundary")),
    "awnn/eq11": Place(CH1, "The starting widths: the paper's values and ours"),
    "awnn/eq13": Place(CH2, "The terms of the ELBO", (T_AWNN + "test_negative_elbo_terms_equal_hand_computation",
                                                      T_AWNN + "test_predictive_term_is_scaled_by_n_over_m")),
    "awnn/eq14": Place(CH1, WIDTH, (T_AWNN + "test_forward_matches_hand_written_eq14",)),
    "awnn/eq15": Place(CH1, KAIMING, (T_AWNN + "test_kaiming_plus_weight_variance",
                                      T_AWNN + "test_kaiming_plus_keeps_activation_variance_across_five_relu_layers")),
    "awnn/eq19": Place(CH1, KAIMING, (T_AWNN + "test_kaiming_plus_weight_variance",)),
    "awnn/sec3.3": Place(CH1, "What adapting costs per training step (Sec. 3.3)"),
    "awnn/fig1": Place(CH1, WIDTH, (T_AWNN + "test_discretized_exponential_is_a_distribution",
                                    T_AWNN + "test_quantile_width_holds_mass_k",
                                    T_AWNN + "test_forward_matches_hand_written_eq14")),
    "awnn/fig2": Place(CH1, KAIMING),
    "awnn/fig7-left": Place(CH1, KAIMING),
    "awnn/fig7-right": Place(CH1, "Training on SpiralHard (Fig. 7, right)"),
    "awnn/fig8": Place(CH2, "The three tasks (Fig. 8)", drawn_from=()),  # drawn from our generators
    "awnn/fig3-left": Place(CH2, "Width and accuracy over training (Fig. 3)",
                            drawn_from=("awnn-tabular-adaptive", "awnn-tabular-fixed")),
    "awnn/fig3-right": Place(CH2, "Width and accuracy over training (Fig. 3)",
                             drawn_from=("awnn-tabular-adaptive", "awnn-tabular-fixed")),
    "awnn/table3": Place(CH2),
    "awnn/fig5-left": Place(CH3, "Compression during training (Fig. 5)"),
    "awnn/fig5-right": Place(CH3, "Compression during training (Fig. 5)"),
    "awnn/fig6-left": Place(CH3, "Compression after training (Fig. 6)"),
    "awnn/fig6-right": Place(CH3, "Compression after training (Fig. 6)"),
    "awnn/fig4-left": Place(CH4, "Batch size and starting rate (Fig. 4)"),
    "awnn/fig4-right": Place(CH4, "Batch size and starting rate (Fig. 4)"),
    "awnn/fig10": Place(CH4, "The same sweeps, by activation (Fig. 10)"),
    "awnn/appd/spiral-fixed-plus-accuracy": Place(CH4, "Fixed+: the fixed MLP at AWNN's width (App. D)"),
    "awnn/appd/spiralhard-fixed-plus-accuracy": Place(CH4, "Fixed+: the fixed MLP at AWNN's width (App. D)"),
    # chapter 7 (text): Table 1's Multi30k row, the "200x" claim and Multi30k's size (Table 2)
    **{f"awnn/table1/multi30k-{arm}-{q}": Place("awnn_07_text", "Table 1's Multi30k row beside ours",
                                                 drawn_from=("awnn-text",))
       for arm in ("fixed", "awnn") for q in ("loss", "width")},
    "awnn/sec5/multi30k-ffn-parameter-ratio": Place("awnn_07_text", "Far fewer FFN parameters at a comparable loss?",
                                                     drawn_from=("awnn-text",)),
    "awnn/table2/multi30k-samples": Place("awnn_07_text", "The setting, and why this budget"),
    **{f"awnn/table1/{d}-{arm}-{q}": Place(CH2, "Accuracy and total width (Table 1)")
       for d in TABULAR for arm in ("fixed", "awnn") for q in ("accuracy", "width")},
    **{f"awnn/table2/{d}-samples": Place(CH2, "The three tasks (Fig. 8)") for d in TABULAR},
}

# Chapters 5 (images) and 6 (graphs): Table 1's image and graph rows, Figs. 9 and 11, Tables 2/4/5, App. D.
CH5, CH6 = "awnn_05_images", "awnn_06_graphs"
TABLE1_SECTION, SETTING_SECTION = "Accuracy and width (Table 1)", "The setting, and why this budget"
PLACES |= {
    # the offline dataset's rows are drawn from the stored runs; CIFAR's need a download
    **{f"awnn/table1/{d}-{arm}-{q}": Place(CH5, TABLE1_SECTION, drawn_from=("awnn-images",) if d == "mnist" else None)
       for d in ("mnist", "cifar10", "cifar100") for arm in ("fixed", "awnn") for q in ("accuracy", "width")},
    **{f"awnn/table2/{d}-samples": Place(CH5, SETTING_SECTION) for d in ("mnist", "cifar10", "cifar100")},
    "awnn/table4": Place(CH5, SETTING_SECTION),
    "awnn/fig9": Place(CH5, "Width and task difficulty (Fig. 9)", drawn_from=("awnn-images",)),
    **{f"awnn/table1/{d}-{arm}-{q}": Place(CH6, TABLE1_SECTION, drawn_from=("awnn-graphs",) if d == "nci1" else None)
       for d in ("nci1", "reddit-b") for arm in ("fixed", "awnn") for q in ("accuracy", "width")},
    "awnn/table2/nci1-samples": Place(CH6, "The protocol"),
    "awnn/table5": Place(CH6, SETTING_SECTION),
    "awnn/fig11": Place(CH6, "Learned neurons per layer (Fig. 11)", drawn_from=("awnn-graphs",)),
    "awnn/appd/reddit-b-fixed-plus-accuracy": Place(CH6, "Fixed+ on NCI1 (App. D)"),
}
# Exact facts: configurations and counts that the tests check against the paper's tables.
T_EXACT = "tests/test_ledger_exact.py::"
T_DOMAINS = "tests/test_awnn_domains.py::test_profiles_are_table4_and_table5_and_the_stated_book_subsets"
PLACES |= {
    "awnn/table3": Place(CH2, checked_by=("tests/test_awnn_adaptive.py::test_paper_profile_is_the_papers_setting",)),
    "awnn/table4": Place(CH5, SETTING_SECTION, checked_by=(T_DOMAINS,)),
    "awnn/table5": Place(CH6, SETTING_SECTION, checked_by=(T_DOMAINS,)),
    "awnn/table2/mnist-samples": Place(CH5, SETTING_SECTION,
                                       checked_by=(T_EXACT + "test_awnn_table2_mnist_has_70000_samples",)),
    **{f"awnn/table1/{d}-fixed-width": Place(CH2, "Accuracy and total width (Table 1)",
                                             checked_by=(T_EXACT + "test_awnn_table1_fixed_widths_are_the_fixed_runs_widths",))
       for d in TABULAR},
}

#: Every AWNN item, in paper order, placed in the book.
ITEMS: tuple[PaperItem, ...] = place_items(_items(), PLACES)
item = item_lookup(ITEMS, PAPER)
