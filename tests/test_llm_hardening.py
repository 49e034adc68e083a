"""Issue 10 (hardening) for the provider clients: the key never goes to another host, and no
piece of it survives in an error text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llm_helpers import (
    KEY,
    anthropic_client,
    anthropic_message,
    openai_client,
    openai_completion,
    simple_request,
)
from llm_server import Reply, ScriptedServer

from yiemagent.llm import LlmClient, LlmError
from yiemagent.llm.redact import Secret

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


def key_headers(sent: Any) -> list[str]:
    """The headers of a recorded request that carry the test key."""
    return [name for name, value in sent.headers.items() if KEY in value]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("make", CLIENTS)
def test_a_redirect_is_an_error_and_no_other_host_gets_the_key(
        server: ScriptedServer, make: ClientFactory, status: int) -> None:
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
    assert [key_headers(sent) for sent in server.requests] != [[]]  # the configured host got it
    assert len(server.requests) == 1


@pytest.mark.parametrize("make", CLIENTS)
def test_a_short_key_leaves_error_texts_whole(server: ScriptedServer, make: ClientFactory) -> None:
    text = "context length exceeded: max 8192 tokens (x, y)"
    server.json({"type": "error", "error": {"type": "invalid_request_error", "message": text}},
                status=400)
    with pytest.raises(LlmError) as info:
        make(server, api_key="x")(simple_request())
    assert info.value.provider_message == text
    assert f"HTTP 400, invalid_request_error): {text}" in str(info.value)
    assert server.requests[0].headers.get("x-api-key", server.requests[0].headers.get(
        "authorization")) in ("x", "Bearer x")  # the short key is still sent as it is


@pytest.mark.parametrize(("key", "text", "scrubbed"), [
    ("x", "a x in context", "a x in context"),
    ("1234567", "id 1234567 and 12345678", "id 1234567 and 12345678"),  # 7: too short to hide
    ("12345678", "id 1234567 and 12345678", "id 1234567 and ***"),  # 8 characters: scrubbed
])
def test_only_keys_of_8_characters_or_more_are_scrubbed(key: str, text: str, scrubbed: str) -> None:
    assert Secret(key).scrub(text) == scrubbed
