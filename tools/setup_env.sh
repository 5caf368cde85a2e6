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
echo "[setup] installing pinned requirements into $venv (the first run downloads about 5 GB)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# pip on some machines lists local wheel folders that do not exist for most
# packages; its warnings about them are noise, so they are filtered out.
quiet_locations() { sed -u "/^WARNING: Location 'file:/d"; }
pip_install() { "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | quiet_locations; }
# The installer is uv (pinned below, from PyPI), which downloads and unpacks in parallel and
# links from its cache: measured on this project's 2-core machine, requirements.txt into a new
# venv took 39 s with an empty uv cache and 5 s with a warm one, against about 170 s for pip
# (the same 152 versions either way). uv reads neither pip.conf nor PIP_* variables: a machine
# that installs through its own pip index or mirror sets HACN_INSTALLER=pip.
# A uv that cannot be installed falls back to pip.
installer=${HACN_INSTALLER:-uv}
case "$installer" in
  uv|pip) ;;
  *) echo "[setup] HACN_INSTALLER=$installer: allowed values are uv, pip" >&2; exit 2 ;;
esac
if [ "$installer" = uv ] && ! pip_install uv==0.13.9; then
  echo "[setup] uv could not be installed; installing with pip"
  installer=pip
fi
# Bytecode: uv installs source files only, and where PYTHONDONTWRITEBYTECODE is set (as on this project's
# machines) every process then compiles what it imports: torch._dynamo, which torch's optimizers import on
# first use, took 12 CPU-s a process uncompiled and 6.5 s compiled (pip compiles by default). So the install
# is compiled once, on every core, but for what no process of this project imports: the packages' own test
# suites (45 of the 224 MB of Python the requirements install: pandas/tests, scipy's, sympy's, torch's
# testing/_internal, ...) and the installers (pip, setuptools). Measured on this project's 2-core machine,
# a fresh install from a warm uv cache: 63 CPU-s and 66 s with uv's --compile-bytecode (everything), 48 CPU-s
# and 49 s this way. compileall exits 1 for the few files of the packages' own that are not Python 3 (uv's
# compile skips them too), hence the || true.
compile_bytecode() {
  local site
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$venv/bin/python" -m compileall -q -j 0 \
    -x '/(tests?|testing/_internal)/|/site-packages/(pip|setuptools|_distutils_hack)/' "$site" >/dev/null || true
}
if [ "$installer" = uv ]; then
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" -r requirements.txt
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" --no-deps --no-build-isolation -e .
  compile_bytecode
else
  pip_install -r requirements.txt
  pip_install --no-deps --no-build-isolation -e .
fi
"$venv/bin/python" tools/check_torch_pair.py
echo "$want" > "$stamp"
echo "[setup] done"
