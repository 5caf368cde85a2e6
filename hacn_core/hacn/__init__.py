"""Hybrid Auto-Compressing Networks (H-ACN): how strongly each layer connects to the next is learned.

The paper's forward rule (Sec. 2, Eqs. 1-2; Appendix G, Algorithm 1), implemented
by :class:`~hacn_core.hacn.connectivity.ResidualStack`::

    x_i = f_i(x_{i-1}) + a_i x_{i-1},      y = sum_{i=0..L} f_i(x_{i-1}),   f_0 = x_0

``a_i = 1`` is a ResNet, ``a_i = 0`` an Auto-Compressing Network (ACN), and
trainable ``a_i ~ N(0.25, 0.005)`` an H-ACN. The Direct Layer Connectivity
Matrix ``C`` (Eqs. 3-5, Fig. 8), the total connectivity strength
``Gamma = ||a||_2 / sqrt(L)``, the convergence distance ``Delta_t`` and the
layer-wise accuracy (Sec. 3.1, Sec. 4) are in :mod:`hacn_core.hacn.connectivity`;
the studies (``hacn_core.hacn.studies``) train the Mixers of ``hacn_core.models``.
:mod:`hacn_core.hacn.text` holds the language-model study's text tools (Sec. 3.4,
Table 1): character noise, the multiple-choice scorer, the character tokenizer,
uint16 token files and the held-out Tiny Shakespeare cloze.
"""
