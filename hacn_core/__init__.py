"""hacn_core: the library behind hacn-book.

Reproduces three papers on how layers connect and how wide they are: Hybrid
Auto-Compressing Networks (H-ACN), Adaptive Width Neural Networks (AWNN) and
Residual Gates. The house:

- ``engine/``   paper-agnostic: training loop, optimizers, data, results store, profiles,
                registry, statistics, tables and plots
- ``hacn/``, ``awnn/``, ``gates/``   one package per paper: its equations first, its studies in ``studies/``
- ``models/``   the backbones (Mixer, ResNet / WRN, FC nets) that take a residual rule
- ``catalog``   every experiment id and the study module that defines it
- ``paper_items``, ``ledger``   every table and figure of the papers, and ours beside it
- ``exact_checks``   numbers that follow from the definitions alone
"""

__version__ = "0.1.0"
