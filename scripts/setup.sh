#!/usr/bin/env bash
# Creates (or reuses) .venv and installs yiemagent with its dev extra into it.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
echo "yiemagent installed in .venv; activate it with: source .venv/bin/activate"
