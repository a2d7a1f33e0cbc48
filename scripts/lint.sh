#!/usr/bin/env bash
# Installs what is missing, then runs the static checks CI runs before the tests (configured in pyproject.toml):
# ruff and mypy over pyruntime/, tools/, tests/ and bench/ (mypy --strict for the package and tools, every body checked
# in tests and benchmarks). Both always run, so one pass shows every finding; the exit status is non-zero when either
# finds something.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
PY="${COREAI_VENV:-.venv}/bin/python"
status=0
"$PY" -m ruff check || status=1
"$PY" -m mypy || status=1
exit "$status"
