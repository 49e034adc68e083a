"""A server's usage that cannot be read leaves the reply unpriced, end to end: a loopback server
speaking OpenAI's or Anthropic's protocol reports its token counts as a negative number, null,
text, an empty object or ``1e400``, and the agent's run counts the call as unpriced (cost
``None``, ``unpriced_calls`` 1) with no count below 0, instead of pricing it as 0 tokens (0.0)."""

from __future__ import annotations

import json

import pytest
from llm_helpers import KEY, anthropic_client, anthropic_message, openai_client, openai_completion
from llm_server import ScriptedServer

from yiemagent import Prices, YiemAgent

WAIT_S = 20.0
BAD_USAGE = [
    '{"prompt_tokens": -5, "completion_tokens": 7, "total_tokens": 2}',
    '{"prompt_tokens": null, "completion_tokens": null, "total_tokens": null}',
    '{"prompt_tokens": "12", "completion_tokens": "7"}',
    "{}",
    '{"prompt_tokens": 1e400, "completion_tokens": 7}',
    '"lots"',
]
BAD_ANTHROPIC_USAGE = [
    '{"input_tokens": -5, "output_tokens": 7}',
    '{"input_tokens": null, "output_tokens": null}',
    '{"input_tokens": "12", "output_tokens": 7}',
    "{}",
    '{"input_tokens": 1e400, "output_tokens": 7}',
]
PRICES = {"gpt-4o-mini": Prices(1e-6, 2e-6), "claude-sonnet-4-5": Prices(1e-6, 2e-6)}


def body_with_usage(body: dict[str, object], usage: str) -> str:
    """``body`` as JSON text with ``usage`` (raw JSON text, so ``1e400`` stays as the server sent it)."""
    body = {**body, "usage": "USAGE"}
    return json.dumps(body).replace('"USAGE"', usage)


def assert_unpriced(agent: YiemAgent) -> None:
    response = agent.prompt("Hello", timeout=WAIT_S)
    assert response.stop_reason == "stop", response.error_message
    usage = response.run_usage
    assert usage is not None and usage.cost is None and usage.unpriced_calls == 1
    assert min(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) >= 0
    assert json.loads(json.dumps(response.to_dict(), allow_nan=False))["stop_reason"] == "stop"


@pytest.mark.parametrize("usage", BAD_USAGE)
def test_an_openai_servers_unusable_usage_leaves_the_call_unpriced(
    server: ScriptedServer, usage: str
) -> None:
    server.text(body_with_usage(openai_completion("Hi."), usage))
    with YiemAgent(llm_call=openai_client(server, api_key=KEY), prices=PRICES) as agent:
        assert_unpriced(agent)


@pytest.mark.parametrize("usage", BAD_ANTHROPIC_USAGE)
def test_an_anthropic_servers_unusable_usage_leaves_the_call_unpriced(
    server: ScriptedServer, usage: str
) -> None:
    server.text(body_with_usage(anthropic_message([{"type": "text", "text": "Hi."}]), usage))
    with YiemAgent(llm_call=anthropic_client(server, stream=False), prices=PRICES) as agent:
        assert_unpriced(agent)


def test_a_servers_readable_usage_is_priced(server: ScriptedServer) -> None:
    server.json(openai_completion("Hi."))
    with YiemAgent(llm_call=openai_client(server), prices=PRICES) as agent:
        usage = agent.prompt("Hello", timeout=WAIT_S).run_usage
    assert usage is not None and usage.unpriced_calls == 0
    assert usage.cost == pytest.approx(19e-6 + 10 * 2e-6)
