"""The paper-agnostic engine every study runs on.

- ``config``    :class:`TrainConfig`, every knob of a run, validated; ``optimizer_for``, ``schedule_for``
- ``training``  the training loop (:func:`fit`), callbacks, SIGINT/SIGTERM/SIGHUP, the NaN guard, the progress bar
- ``checkpoint`` atomic checkpoints with every random state, damaged files named, the segments of a resumed run
- ``optim``     optimizers, parameter groups by role, learning-rate schedules (plain arguments)
- ``roles``     parameter roles (gate, mixing weight, rate, ...) that optimizers and reports read
- ``data``      the data root, offline-aware loaders and the synthetic tabular tasks
- ``text``      character noise, a character tokenizer and Tiny Shakespeare (shared by H-ACN and AWNN)
- ``results``   the results store (one JSON file per run) and ``run_or_load``; what a run's hash holds
- ``processes`` who holds a run's lock (pid and start time), the temporary files a killed writer left
- ``profiles``  smoke / book / paper scale presets
- ``registry``  :class:`Experiment` and :class:`Link`, running and selecting an experiment's runs
- ``stats``     means with confidence intervals, cell means
- ``tables``, ``plots``  what a chapter shows: the claims table and the house plotting style
"""
