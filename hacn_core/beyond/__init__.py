"""Beyond the papers: new studies that combine the reproduced methods. **Not a reproduction.**

Nothing in this package reproduces a table or figure of a paper. The other packages
(``hacn_core.hacn``, ``hacn_core.awnn``, ``hacn_core.gates``) implement and check what
each paper claims; here we ask questions none of the papers asks, with their pieces
put together. Results of this package are ours alone and have no paper value to be
compared with (no experiment here links to the ledger).

Connectivity and width learned together (:mod:`hacn_core.beyond.width_connectivity`)
-------------------------------------------------------------------------------------
One network learns both *how strongly its layers connect* (H-ACN) and *how wide each
layer is* (AWNN). The two equations combined:

H-ACN's residual rule with learnable ``a_i`` (H-ACN Sec. 2, Eq. 2; the direct
connection strengths it induces, Eqs. 3-5)::

    x_i = f_i(x_{i-1}) + a_i x_{i-1},        y = sum_{i=0..L} f_i(x_{i-1}),   f_0 = x_0     (Eq. 2)
    input_k = sum_{i<k} c_{i->k} h_i,         c_{i->j} = prod_{l=i+1..j-1} a_l              (Eqs. 3-5)

(``a_i = 1``: ResNet, ``a_i = 0``: ACN, ``a_i ~ N(0.25, 0.005)`` trained: H-ACN), where
every layer's MLP is AWNN's adaptive MLP, whose hidden width follows a learned rate
``nu_i`` (AWNN Sec. 3, Eqs. 11-14)::

    D_i = quantile of f(.; nu_i) at k = ceil(ln(1 / (1 - k)) / nu_i)                          (Eq. 11)
    f(j; nu_i) = e^{-nu_i j} - e^{-nu_i (j + 1)}                                             (Eq. 12)
    -ELBO = -(N/M) sum_batch log p(y | x; rho, nu) - sum log p(rho)/q(rho) - sum_i log p(nu_i)/q(nu_i)  (Eq. 13)
    h_j = sigma(W x + b)_j f(j; nu_i),   j = 0..D_i - 1                                      (Eq. 14)

so ``f_i(x) = W_out^i h(x)`` (the Mixer adds its token mixing, ``f_i = t + c``). The
``a_i`` and the ``nu_i`` are trained together by back-propagation of Eq. 13 (the
``a_i`` are ordinary parameters of the predictive term); the widths are reset from
the rates after every optimizer step (AWNN Algorithm 1). Questions: does a layer's
learned width depend on its depth, and differently under ResNet, ACN and H-ACN
connectivity? Does the total width (and ``Gamma``) follow task difficulty? What does
width learning cost in accuracy, parameters and time against a twin whose width is
frozen at its start (all else equal) and against the fixed-width H-ACN runs? And how
do H-ACN's layer-wise exits (H-ACN Sec. 3.1) and AWNN's post-hoc truncation (AWNN
Sec. 5.4) trade off, cut together?

Modules
-------
* :mod:`~hacn_core.beyond.stack`: the residual MLP stack on 2-d inputs (the tabular
  setting of AWNN's SpiralHard, layers joined by any H-ACN rule);
* :mod:`~hacn_core.beyond.combined`: tools for a model with adaptive MLPs joined by a
  residual rule: its widths, freezing its width learning, its fixed-width twin,
  truncated copies and the (exit depth x kept width) truncation grid;
* :mod:`~hacn_core.beyond.width_connectivity`: the experiment ``width-connectivity``;
* :mod:`~hacn_core.beyond.width_connectivity_report`: the tables a chapter shows,
  read from stored runs only.

This package may import ``hacn_core.hacn``, ``hacn_core.awnn``, ``hacn_core.engine``
and ``hacn_core.models``; none of them imports it (``tests/test_layout.py``).
"""
