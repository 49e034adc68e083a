"""``PriceCatalog``: ``prices=`` from genai-prices' maintained table (the ``prices`` extra), with
its real data, no mocks: a known model's prices per token are genai-prices', a run of it costs
what genai-prices charges for the same usage (cache reads and writes, tiers), a model the table
does not have leaves the run unpriced, and nothing reaches the network (every test runs with the
sockets refused and genai-prices' updater watched)."""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tiers import absent

if sys.version_info < (3, 11):  # genai-prices 0.2 needs 3.11: the extra installs nothing on 3.10
    pytest.skip("the prices extra needs Python 3.11 or later", allow_module_level=True)
pytest.importorskip("genai_prices", reason=absent("prices"))

from genai_prices import Usage, calc_price, update_prices

from yiemagent import (
    AgentToolCall,
    AssistantMessage,
    LlmUsage,
    PriceCatalog,
    Prices,
    RunConfig,
    RunUsage,
    TextContent,
    UsageLimits,
    YiemAgent,
    function_tool,
)

WAIT_S = 10.0
MODELS = [("gpt-4o", "openai"), ("claude-sonnet-4", "anthropic")]
# The same guard for a fresh interpreter: any connection or name lookup fails the child.
NO_NETWORK = (
    "import socket\n"
    "def _refused(*args, **kwargs):\n"
    "    raise SystemExit('network access in a test: ' + repr(args))\n"
    "socket.socket.connect = socket.socket.connect_ex = _refused\n"
    "socket.getaddrinfo = socket.create_connection = _refused\n"
)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every way out refused and recorded (a refusal in the agent's thread would be swallowed),
    genai-prices' fetch too; at the end nothing was tried and its updater never ran."""
    tried: list[str] = []

    def refuse(what: str) -> Any:
        def refused(*args: Any, **kwargs: Any) -> Any:
            tried.append(f"{what}{args[1:] if what.startswith('socket.') else args}")
            raise OSError(f"no network in these tests: {what}")

        return refused

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(update_prices.UpdatePrices, "fetch", refuse("UpdatePrices.fetch"))
    yield tried
    assert tried == []
    assert update_prices._shared_updater.ref_count == 0 and update_prices._shared_updater.thread is None
    assert not [t.name for t in threading.enumerate() if t.name.startswith("genai_prices")]


def charged(model: str, provider: str, **tokens: int) -> float:
    """What genai-prices charges, its ``input_tokens`` being every input token (cached or not)."""
    return float(calc_price(Usage(**tokens), model, provider_id=provider).total_price)


@function_tool
def look(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def reply(model: str, usage: LlmUsage, *, call: bool = False) -> AssistantMessage:
    if call:
        return AssistantMessage(
            [AgentToolCall("c1", "look", {"q": "x"})], stop_reason="toolUse", model=model, usage=usage
        )
    return AssistantMessage([TextContent("done")], model=model, usage=usage)


def run(replies: list[AssistantMessage], **options: Any) -> RunUsage:
    script = iter(replies)
    agent = YiemAgent(llm_call=lambda request: next(script), tools=[look], **options)
    with agent:
        return agent.prompt("go", timeout=WAIT_S).run_usage


@pytest.mark.parametrize(("model", "provider"), MODELS)
def test_a_known_models_prices_per_token_are_genai_prices(model: str, provider: str) -> None:
    prices = PriceCatalog().get(model)
    assert isinstance(prices, Prices)
    # 1000 tokens: below every tier (some models cost more past 200k input tokens).
    n = 1000
    assert prices.input == pytest.approx(charged(model, provider, input_tokens=n) / n, rel=1e-12)
    assert prices.output == pytest.approx(charged(model, provider, output_tokens=n) / n, rel=1e-12)
    cached = charged(model, provider, input_tokens=n, cache_read_tokens=n) / n
    assert prices.cache_read == pytest.approx(cached, rel=1e-12)
    assert prices.output > prices.input > prices.cache_read > 0


def test_gpt_4o_costs_what_a_million_tokens_cost_divided_out() -> None:
    prices = PriceCatalog()["gpt-4o"]
    million = 1_000_000
    assert prices.input == pytest.approx(charged("gpt-4o", "openai", input_tokens=million) / million)
    assert prices.output == pytest.approx(charged("gpt-4o", "openai", output_tokens=million) / million)


def test_a_run_costs_what_genai_prices_charges_for_its_usage() -> None:
    # OpenAI reported prompt_tokens=2224 with cached_tokens=1024: our input is the 1200 uncached.
    first = LlmUsage(input=1200, output=80, cache_read=1024)
    second = LlmUsage(input=1400, output=25)
    model = "gpt-4o-2024-08-06"  # the dated name the API replies with
    usage = run([reply(model, first, call=True), reply(model, second)], prices=PriceCatalog())
    expected = charged(model, "openai", input_tokens=2224, cache_read_tokens=1024, output_tokens=80)
    expected += charged(model, "openai", input_tokens=1400, output_tokens=25)
    assert (usage.llm_calls, usage.unpriced_calls) == (2, 0)
    assert usage.cost is not None and usage.cost > 0
    assert usage.cost == pytest.approx(expected, abs=1e-12)
    # and what the per-token prices give, for a model without tiers
    p = PriceCatalog()[model]
    assert p.cache_read is not None
    assert usage.cost == pytest.approx(2600 * p.input + 1024 * p.cache_read + 105 * p.output, rel=1e-9)


def test_cache_writes_and_tiers_are_priced_as_genai_prices_prices_them() -> None:
    # Anthropic reports input_tokens beside cache_read_input_tokens and cache_creation_input_tokens.
    small = LlmUsage(input=50, output=40, cache_read=2000, cache_write=500)
    large = LlmUsage(input=250_000, output=100)  # past the 200k tier
    model = "claude-sonnet-4-5-20250929"  # tiered: more past 200k input tokens
    usage = run([reply(model, small, call=True), reply(model, large)], prices=PriceCatalog())
    first = charged(
        model,
        "anthropic",
        input_tokens=2550,
        cache_read_tokens=2000,
        cache_write_tokens=500,
        output_tokens=40,
    )
    second = charged(model, "anthropic", input_tokens=250_000, output_tokens=100)
    assert usage.unpriced_calls == 0 and usage.cost is not None
    assert usage.cost == pytest.approx(first + second, abs=1e-12)
    p = PriceCatalog()[model]
    assert p.cache_read is not None
    assert first > 50 * p.input + 2000 * p.cache_read + 40 * p.output  # the cache write is charged
    assert second > 250_000 * p.input + 100 * p.output  # at the tier's price, not the base


def test_a_model_the_table_does_not_have_leaves_the_run_unpriced() -> None:
    catalog = PriceCatalog()
    assert catalog.get("no-such-model-anywhere") is None and "no-such-model-anywhere" not in catalog
    with pytest.raises(KeyError):
        catalog["no-such-model-anywhere"]
    only = run([reply("no-such-model-anywhere", LlmUsage(input=10, output=2))], prices=catalog)
    assert only.cost is None and only.unpriced_calls == 1
    mixed = run(
        [reply("gpt-4o", LlmUsage(input=10, output=2), call=True), reply("no-such-model", LlmUsage(input=5))],
        prices=catalog,
    )
    assert (mixed.llm_calls, mixed.cost, mixed.unpriced_calls) == (2, None, 1)


def test_prices_given_come_before_the_table_and_the_catalog_is_kept_as_given() -> None:
    mine = Prices(1e-6, 2e-6)
    catalog = PriceCatalog({"my-model": mine, "gpt-4o": {"input": 0.0, "output": 0.0}})
    assert catalog.get("my-model") == mine and catalog["gpt-4o"] == Prices(0.0, 0.0)
    assert RunConfig(llm_call=lambda request: None, prices=catalog).prices is catalog
    usage = run([reply("my-model", LlmUsage(input=100, output=10))], prices=catalog)
    assert usage.cost == pytest.approx(100e-6 + 20e-6)
    with pytest.raises(ValueError, match="input must be a finite number"):
        PriceCatalog({"m": {"input": -1, "output": 0}})


def test_a_provider_narrows_the_lookup_and_an_unknown_one_is_refused() -> None:
    openai = PriceCatalog(provider="openai")
    assert openai.get("gpt-4o") == PriceCatalog().get("gpt-4o")
    assert openai.get("claude-sonnet-4") is None
    with pytest.raises(ValueError, match="no provider 'no-such-provider'"):
        PriceCatalog(provider="no-such-provider")


def test_max_cost_is_checked_with_the_catalogs_prices() -> None:
    # Before the first call the agent's model is priced: its input alone passes 1e-9 USD.
    usage_limits = UsageLimits(max_cost=1e-9)
    agent = YiemAgent(
        llm_call=lambda request: reply("gpt-4o", LlmUsage(input=1, output=1)),
        model="gpt-4o",
        prices=PriceCatalog(),
    )
    with agent:
        response = agent.prompt("go", timeout=WAIT_S, usage_limits=usage_limits)
    assert response.stop_reason == "usage_limit" and "max_cost" in (response.error_message or "")


def fresh_python(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (which must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_the_table_is_the_bundled_one_even_when_the_process_set_another() -> None:
    # What UpdatePrices does once it has fetched: set a snapshot for the whole process (here an
    # empty one, before the first catalog is made, in a fresh interpreter).
    code = (
        f"{NO_NETWORK}"
        "from genai_prices import Usage, calc_price, data_snapshot\n"
        "data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot([], from_auto_update=True))\n"
        "try:\n"
        "    calc_price(Usage(input_tokens=1), 'gpt-4o', provider_id='openai')\n"
        "except LookupError:\n"
        "    print('the process snapshot is empty')\n"
        "from yiemagent import LlmUsage, PriceCatalog\n"
        "print(PriceCatalog()['gpt-4o'].cost(LlmUsage(input=1000, output=10)))\n"
    )
    said, cost = fresh_python(code).splitlines()
    assert said == "the process snapshot is empty"
    assert float(cost) == pytest.approx(charged("gpt-4o", "openai", input_tokens=1000, output_tokens=10))


def test_a_catalog_survives_pickling_as_for_a_ray_worker() -> None:
    catalog = PriceCatalog({"my-model": Prices(1e-6, 1e-6)}, provider="openai")
    catalog.get("gpt-4o")
    copy = pickle.loads(pickle.dumps(catalog))
    assert isinstance(copy, PriceCatalog) and copy.provider == "openai"
    assert copy.get("gpt-4o") == catalog.get("gpt-4o") and copy.get("my-model") == Prices(1e-6, 1e-6)


def test_without_genai_prices_the_catalog_says_which_extra_to_install() -> None:
    code = (
        f"{NO_NETWORK}"
        "import sys\n"
        "sys.modules['genai_prices'] = None\n"
        "from yiemagent import PriceCatalog\n"
        "try:\n"
        "    PriceCatalog()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert "pip install 'yiemagent[prices]'" in fresh_python(code)
