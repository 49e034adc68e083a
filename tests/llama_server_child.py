"""Run llama.cpp's own server (``llama-server``, served in-process by xllamacpp) on loopback.

``python tests/llama_server_child.py MODEL N_CTX PORT`` serves ``MODEL`` on
``http://127.0.0.1:PORT`` with a context of ``N_CTX`` tokens, one request at a time, until it is
terminated, with ``chatml_tools.jinja`` as its chat template (ChatML with tools in the Hermes
form: SmolLM2's own template has no tools, so llama.cpp would not parse a call from it). What
``llama-server --model MODEL --ctx-size N_CTX --port PORT --host 127.0.0.1 --parallel 1 --jinja
--chat-template-file tests/chatml_tools.jinja`` does, without a binary to build.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import xllamacpp


def main() -> None:
    model, n_ctx, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.port = port
    params.hostnames = ["127.0.0.1"]
    threads = os.cpu_count() or 1  # every core: the default is fewer, and slower on 2 cores
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    params.cache_ram_mib = 0
    params.use_jinja = True
    params.chat_template = (Path(__file__).parent / "chatml_tools.jinja").read_text(encoding="utf-8")
    server = xllamacpp.Server(params)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(server.listening_address, flush=True)
    stop.wait()


if __name__ == "__main__":
    main()
