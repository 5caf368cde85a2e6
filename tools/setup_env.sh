#!/usr/bin/env bash
# Create or update the project-local virtual environment (.venv) from the pinned
# requirements. Idempotent: it does nothing when requirements.txt and pyproject.toml
# are unchanged since the last successful install (a hash is kept in the venv).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${HACN_VENV:-.venv}
python=${PYTHON:-python3}
want=$(cat requirements.txt pyproject.toml tools/setup_env.sh | sha256sum | cut -c1-16)
stamp="$venv/.hacn-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
echo "[setup] installing pinned requirements into $venv (first run takes a few minutes)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# pip on some machines lists local wheel folders that do not exist for most
# packages; its warnings about them are noise, so they are filtered out.
quiet_locations() { sed -u "/^WARNING: Location 'file:/d"; }
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements.txt 2>&1 | quiet_locations
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . 2>&1 | quiet_locations
"$venv/bin/python" tools/check_torch_pair.py
echo "$want" > "$stamp"
echo "[setup] done"
