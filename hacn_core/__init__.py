"""hacn_core: the library behind hacn-book.

Reproduces three papers on how layers connect and how wide they are:
Hybrid Auto-Compressing Networks (H-ACN), Adaptive Width Neural Networks (AWNN)
and Residual Gates. One module per concept:

- ``profiles``  : scale presets (smoke / book / paper) chosen by ``HACN_PROFILE``
- ``data``      : data root, offline-aware loaders, AWNN synthetic datasets
- ``results``   : the results store and ``run_or_load``
- ``experiments``: the registry of runnable experiments
- ``ledger``    : the reproduction ledger (paper values next to ours)
- ``plots``     : the house plotting style
- ``roles``, ``optim``, ``training``: parameter roles, optimizers and schedules, the training loop
- ``gates``, ``connectivity``, ``awnn``: the three papers' building blocks; ``models``: the backbones
"""

__version__ = "0.1.0"
