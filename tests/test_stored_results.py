"""Every stored result loads under the configuration hash the current code computes.

Code moves (the layout by paper) must never orphan a stored run: each file in
``results/`` is filed under the hash of its own configuration, and that
configuration is one the experiment's study still generates for the profile the
run was made at, so ``run_or_load`` finds it instead of training again.
"""

import json
from collections import Counter
from pathlib import Path

from hacn_core import catalog
from hacn_core.engine.results import ResultsStore, config_hash

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _stored():
    for path in sorted(RESULTS.glob("*/*.json")):
        yield path, json.loads(path.read_text())


def _derived(experiment_id: str, profile: str) -> set[str]:
    """Configurations a chapter derives from stored runs and files under the experiment: App. D's Fixed+ on
    NCI1 (``awnn-graphs``), whose width is read from the stored AWNN runs, so its runs must have exactly that
    width."""
    if experiment_id != "awnn-graphs":
        return set()
    from hacn_core.awnn.studies import graphs_report as grr

    stored = catalog.stored(experiment_id, profile, store=ResultsStore(RESULTS))  # the committed runs
    width = grr.fixed_plus_width(catalog.get(experiment_id).runs(profile), stored)
    return {config_hash(c) for c in grr.fixed_plus_configs(width, profile)} if width is not None else set()


def test_every_stored_file_is_filed_under_its_configs_hash():
    files = list(_stored())
    assert len(files) > 500  # the committed store, not an empty folder
    for path, data in files:
        assert data["experiment"] == path.parent.name, path
        assert data["config_hash"] == config_hash(data["config"]) == path.stem, path


def test_every_stored_config_is_one_the_current_code_generates():
    generated: dict[tuple[str, str], set[str]] = {}
    missing = Counter()
    for path, data in _stored():
        key = (data["experiment"], data["profile"])
        if key not in generated:
            experiment = catalog.get(data["experiment"])
            generated[key] = {config_hash(c) for c in experiment.runs(data["profile"])} | _derived(*key)
        if data["config_hash"] not in generated[key]:
            missing[key] += 1
    assert not missing, f"stored runs whose configuration no study generates any more: {dict(missing)}"
