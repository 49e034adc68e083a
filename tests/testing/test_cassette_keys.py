"""No key in a cassette, also when it arrives in pieces: a loopback server streams a key two or
three characters at a time (in the reply's text, its reasoning and a tool call's arguments,
the key JSON-escaped there), and the cassette ``record`` writes holds neither the key nor its
JSON-escaped form, in any string, in any one stream's joined deltas or in all of them joined.
Keys the environment holds are masked although the client was never given them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llm_helpers import KEY, openai_chunk, openai_client
from llm_server import ScriptedServer, sse_bytes

from yiemagent import YiemAgent
from yiemagent.llm.http._redact import MASK, Secret
from yiemagent.testing import record
from yiemagent.testing._mask_streams import key_forms, mask_pieces

WAIT_S = 20.0
ENV_KEY = "sk-ant-envkey-0123456789abcdef"  # an Anthropic key in the environment; the client is OpenAI's
EXTRA = 'päss"wörd-2468-ÄÖÜ'  # a secret given to record(), with characters JSON escapes


def in_pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def streamed_reply() -> bytes:
    """Each key a few characters at a time in the text and the reasoning, and JSON-escaped in
    a tool call's arguments (streamed three characters at a time as well)."""
    arguments = json.dumps({"note": f"{ENV_KEY} {EXTRA}"})  # EXTRA as \\u00e4 and \\"
    chunks = [openai_chunk({"reasoning_content": p}) for p in in_pieces(f"thinking of {ENV_KEY}", 2)]
    chunks += [openai_chunk({"content": p}) for p in in_pieces(f"The keys: {ENV_KEY} and {EXTRA} end.", 3)]
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "note", "arguments": ""}}
    chunks.append(openai_chunk({"tool_calls": [call]}))
    for piece in in_pieces(arguments, 3):
        chunks.append(openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    chunks.append(openai_chunk({}, "tool_calls"))
    return sse_bytes(chunks, done=True)


def forbidden() -> list[str]:
    return key_forms([Secret(ENV_KEY), Secret(EXTRA)])


def assert_no_form(text: str, where: str) -> None:
    for form in forbidden():
        assert form not in text, f"{form!r} is in {where}: {text[:300]!r}"


def test_a_key_streamed_in_pieces_is_masked_in_every_way_of_joining_them(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    server.sse([streamed_reply()])
    path = tmp_path / "c.json"
    llm = record(openai_client(server, api_key=KEY, stream=True), path, secrets=[EXTRA])
    with YiemAgent(llm_call=llm, max_turns=1) as agent:
        agent.prompt("go", timeout=WAIT_S)
    raw = path.read_text(encoding="utf-8")
    assert_no_form(raw, "the cassette file")
    assert_no_form(json.dumps(json.loads(raw), ensure_ascii=False), "the cassette, unescaped")
    [interaction] = json.loads(raw)["interactions"]
    deltas = interaction["deltas"]
    assert len(deltas) > 40  # the pieces are all there, only rewritten
    assert_no_form("".join(d["delta"] for d in deltas), "all the deltas joined")
    for kind in ("text", "thinking", "tool_call"):
        joined = "".join(d["delta"] for d in deltas if d["kind"] == kind)
        assert joined, kind
        assert_no_form(joined, f"the {kind} deltas joined")
    text = "".join(d["delta"] for d in deltas if d["kind"] == "text")
    assert text == f"The keys: {MASK} and {MASK} end."  # the rest of the text is kept


@given(
    st.lists(st.text(alphabet="ab-xyz", max_size=6), max_size=12),
    st.sampled_from(["abab-xyz", "xyzxyzab", "aaaaaaaa"]),
)
def test_joined_pieces_hold_no_key_and_only_the_key_is_replaced(pieces: list[str], key: str) -> None:
    masked = mask_pieces(pieces, [key])
    assert len(masked) == len(pieces)
    assert key not in "".join(masked)
    whole = "".join(pieces)
    edges = any(whole.endswith(key[:n]) or whole.startswith(key[-n:]) for n in range(6, len(key)))
    if key not in whole and not edges:
        assert masked == pieces  # nothing to mask: the pieces are returned as they were
