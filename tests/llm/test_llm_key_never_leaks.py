"""Issue 10 (hardening), items 1 to 4, for the provider clients: the key never goes to another
host (redirects, specs without a scheme), no piece of it survives in an error text, and a key too
short to be a secret garbles no text."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from llm_helpers import (
    KEY,
    anthropic_client,
    anthropic_message,
    fast,
    leak_texts,
    openai_client,
    openai_completion,
    simple_request,
)
from llm_server import Recorded, Reply, ScriptedServer, sse_bytes

from yiemagent.core._content import TextContent
from yiemagent.core._context import format_msg_for_llm
from yiemagent.core._messages import UserMessage
from yiemagent.core._tools import AgentContext
from yiemagent.llm import LlmClient, LlmError, create_llm_call, parse_llm_spec
from yiemagent.llm.http._redact import Secret, excerpt

ClientFactory = Callable[..., LlmClient]
CLIENTS = [pytest.param(openai_client, id="openai"), pytest.param(anthropic_client, id="anthropic")]


def good_reply(make: ClientFactory) -> dict[str, Any]:
    """A successful whole reply in the format of the client ``make`` builds."""
    if make is openai_client:
        return openai_completion("followed")
    return anthropic_message([{"type": "text", "text": "followed"}])


def call_outcome(client: LlmClient) -> BaseException | None:
    """Call ``client`` once and return what it raised (``None`` when it returned)."""
    try:
        client(simple_request())
    except Exception as exc:
        return exc
    return None


def key_headers(sent: Recorded) -> list[str]:
    """The headers of a recorded request that carry the test key."""
    return [name for name, value in sent.headers.items() if KEY in value]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("make", CLIENTS)
def test_a_redirect_is_an_error_and_no_other_host_gets_the_key(
    server: ScriptedServer, make: ClientFactory, status: int
) -> None:
    with ScriptedServer() as elsewhere:
        # Same machine, another host name: requests counts it as a different host.
        target = elsewhere.url.replace("127.0.0.1", "localhost") + "/v1/somewhere"
        elsewhere.json(good_reply(make))
        server.add(Reply(status, {"Location": target}))
        error = call_outcome(make(server))
    assert [key_headers(sent) for sent in elsewhere.requests] in ([], [[]])  # the leak itself
    assert elsewhere.requests == []  # not even a request without the key
    assert isinstance(error, LlmError), error
    message = str(error)
    assert f"redirected the request (HTTP {status}) to {target}" in message
    assert "base_url" in message
    assert error.status == status and not error.retryable
    [sent] = server.requests  # one request, not retried
    assert key_headers(sent)  # the configured host did get the key


@pytest.mark.parametrize("make", CLIENTS)
def test_a_short_key_leaves_error_texts_whole(server: ScriptedServer, make: ClientFactory) -> None:
    text = "context length exceeded: max 8192 tokens (x, y)"
    server.json({"type": "error", "error": {"type": "invalid_request_error", "message": text}}, status=400)
    with pytest.raises(LlmError) as info:
        make(server, api_key="x")(simple_request())
    assert info.value.provider_message == text
    assert f"HTTP 400, invalid_request_error): {text}" in str(info.value)
    assert server.requests[0].headers.get("x-api-key", server.requests[0].headers.get("authorization")) in (
        "x",
        "Bearer x",
    )  # the short key is still sent as it is


@pytest.mark.parametrize(
    ("key", "text", "scrubbed"),
    [
        ("x", "a x in context", "a x in context"),
        ("1234567", "id 1234567 and 12345678", "id 1234567 and 12345678"),  # 7: too short to hide
        ("12345678", "id 1234567 and 12345678", "id 1234567 and ***"),  # 8 characters: scrubbed
    ],
)
def test_only_keys_of_8_characters_or_more_are_scrubbed(key: str, text: str, scrubbed: str) -> None:
    assert Secret(key).scrub(text) == scrubbed


def cut_reply(path: str) -> Reply:
    """A reply whose error text the client cuts, where the cut (if made before scrubbing)
    falls 10 characters into the key, which is followed by ``END``.

    Built here, not in the test, so no test frame holds the key as a local (leak_texts reads
    them all)."""
    text = "x" * 490 + KEY + "END"
    if path == "error text":  # provider_error_text keeps 500 characters
        return Reply(401, {"Content-Type": "text/plain"}, text.encode())
    if path == "error object":
        message = {"error": {"type": "authentication_error", "message": text}}
        return Reply(401, {"Content-Type": "application/json"}, json.dumps(message).encode())
    if path == "invalid JSON":  # read_json_body shows the body as error text
        return Reply(200, {"Content-Type": "application/json"}, text.encode())
    if path == "stream chunk":  # the clients show 200 characters of an event that is not JSON
        return Reply(200, {"Content-Type": "text/event-stream"}, chunks=[sse_bytes([text[300:]])])
    assert path == "not a reply"  # the parse modules show 300 characters of the JSON body
    body = {"pad": text[len('{"pad": "') + 200 :]}
    return Reply(200, {"Content-Type": "application/json"}, json.dumps(body).encode())


def fragments(key: str = KEY, size: int = 6) -> list[str]:
    """Every run of ``size`` characters of ``key``."""
    return [key[i : i + size] for i in range(len(key) - size + 1)]


def assert_no_fragment(texts: Iterable[str]) -> None:
    """Fail if any 6 consecutive characters of the key are in one of ``texts``."""
    for text in texts:
        found = [piece for piece in fragments() if piece in text]
        assert not found, f"a piece of the key ({found[0]!r}) leaked into: {text[:600]}"


@pytest.mark.parametrize(
    "path", ["error text", "error object", "invalid JSON", "stream chunk", "not a reply"]
)
@pytest.mark.parametrize("make", CLIENTS)
def test_a_key_cut_by_a_shortened_error_text_leaves_no_piece(
    server: ScriptedServer, make: ClientFactory, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.add(cut_reply(path))
    client = make(server, stream=path == "stream chunk", http=fast(max_retries=0))
    with pytest.raises(LlmError) as info:
        client(simple_request())
    assert_no_fragment(leak_texts(info.value, caplog.records, client=client))
    # Scrubbed, then cut: what follows the key fits now, and is shown.
    assert "xxxxxxxxxx***END" in str(info.value)


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("error: " + KEY[:6], "error: ***"),  # the text ends inside the key: a cut
        ("error: " + KEY[:5], "error: " + KEY[:5]),  # 5 characters: too few to count
        ("error: " + KEY[:12] + "… more", "error: ***… more"),  # cut marked by excerpt
        (KEY[-8:] + " rest", "*** rest"),  # the text starts inside the key
        ("start …" + KEY[-6:] + " rest", "start …*** rest"),
        ("a " + KEY[:10] + " b", "a " + KEY[:10] + " b"),  # not at a cut: some other text
        ("x " + KEY + " y " + KEY[:7], "x *** y ***"),
    ],
)
def test_a_piece_of_the_key_at_a_cut_counts_as_the_key(text: str, scrubbed: str) -> None:
    assert Secret(KEY).scrub(text) == scrubbed


def test_excerpt_scrubs_the_active_key_before_it_cuts() -> None:
    with Secret(KEY).active():
        assert excerpt("x" * 490 + KEY + " tail", 500) == "x" * 490 + "*** tail"
        # A partial echo of the key, whole before the cut, is split by it: masked after.
        assert excerpt("x" * 490 + KEY[:12] + " tail", 500) == "x" * 490 + "***…"
    assert excerpt("x" * 495 + KEY, 500) == "x" * 495 + KEY[:5] + "…"  # no key active: just cut


@pytest.mark.parametrize(
    ("spec", "right"),
    [
        ("openai:smollm2@127.0.0.1:8765/v1", "openai:smollm2@http://127.0.0.1:8765/v1"),
        ("openai:qwen@gpu-box:8000", "openai:qwen@http://gpu-box:8000"),
        ("ollama:qwen2.5@localhost/v1", "ollama:qwen2.5@http://localhost/v1"),
        ("openrouter:m@openrouter.ai/api/v1", "openrouter:m@http://openrouter.ai/api/v1"),
        ("openai:m@[::1]:8000/v1", "openai:m@http://[::1]:8000/v1"),
        ("vllm:org/model@10.0.0.7", "vllm:org/model@http://10.0.0.7"),
    ],
)
def test_a_server_address_without_a_scheme_is_refused(
    monkeypatch: pytest.MonkeyPatch, spec: str, right: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # it must never go to api.openai.com with such a spec
    with pytest.raises(ValueError, match="has no http:// or https://") as info:
        parse_llm_spec(spec)
    assert repr(right) in str(info.value)
    with pytest.raises(ValueError, match=re.escape(repr(right))):
        create_llm_call(spec)


@pytest.mark.parametrize("spec", ["openai:m@ftp://host/v1", "openai:@http://host:8000/v1"])
def test_a_spec_with_an_unusable_url_part_is_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="LLM spec"):
        parse_llm_spec(spec)


@pytest.mark.parametrize(
    ("spec", "model"),
    [
        ("anthropic:claude-3-5-sonnet@20240620", "claude-3-5-sonnet@20240620"),  # Vertex style
        ("openai:ft-model@latest", "ft-model@latest"),
        ("ollama:qwen@sha256:9f8e7d", "qwen@sha256:9f8e7d"),  # not a port: letters after the colon
        ("openai:model@v1.2", "model@v1.2"),  # dotted, but not a domain: ends in digits
    ],
)
def test_a_model_name_may_hold_an_at_sign(spec: str, model: str) -> None:
    assert parse_llm_spec(spec) == (spec.partition(":")[0], model, None)


def test_a_lone_surrogate_in_the_history_is_sent_as_a_json_escape(server: ScriptedServer) -> None:
    server.json(openai_completion("ok"))
    request = format_msg_for_llm(AgentContext("", [UserMessage("half an emoji: \ud83d")], []))
    reply = openai_client(server)(request)
    assert reply.content == [TextContent("ok")]
    assert b'"half an emoji: \\ud83d"' in server.requests[0].raw
