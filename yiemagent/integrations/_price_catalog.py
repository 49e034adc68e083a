"""``PriceCatalog``: ``prices=`` from a maintained table of model prices, genai-prices' (the
``prices`` extra, ``pip install 'yiemagent[prices]'``), instead of a table of your own.

A model is looked up when a reply of it is priced (and before a call, for ``max_cost``), by the
model name the provider replied with; genai-prices matches dated names and aliases
(``gpt-4o-2024-08-06``, ``claude-sonnet-4-20250514``) and, without ``provider=``, finds the
provider from the name. What it finds is a ``CatalogPrices``: the model's prices per token (USD)
as they are now, and a ``cost`` that genai-prices computes from each reply's usage, so tiered
prices, cache writes and prices that change by date or time of day are priced as the provider
bills them. A model the table does not have is a missing key: its calls are unpriced (the run's
cost is ``None`` and ``unpriced_calls`` counts them) unless the provider reported a cost.

Only the table bundled with the installed genai-prices is read, through a snapshot of our own:
never genai-prices' ``UpdatePrices`` (a thread that fetches prices from GitHub), nor a snapshot
something else set for the process. Newer prices come with a newer genai-prices.

genai-prices is imported with ``importlib`` and typed here by the protocols of the few things
used, so type checks read the same whether the extra is installed or not.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Protocol, TypeVar, cast, overload

import attrs

from yiemagent.core._messages import LlmUsage
from yiemagent.core._usage import PriceLookup, Prices, price_table

__all__ = ["CatalogPrices", "PriceCatalog"]

_T = TypeVar("_T")
_INSTALL = "PriceCatalog needs genai-prices: pip install 'yiemagent[prices]' (Python 3.11 or later)"
_PER_PRICE = Decimal(1_000_000)  # genai-prices' token prices are per million tokens


class _Provider(Protocol):
    id: str


class _ModelInfo(Protocol):
    def get_prices(self, request_timestamp: datetime) -> object: ...


class _Calculation(Protocol):
    total_price: Decimal


class _Snapshot(Protocol):
    def find_provider(
        self, model_ref: str | None, provider_id: str | None, provider_api_url: str | None
    ) -> _Provider: ...

    def find_provider_model(
        self, model_ref: str, provider: None, provider_id: str | None, provider_api_url: None
    ) -> tuple[_Provider, _ModelInfo]: ...

    def calc(
        self,
        usage: object,
        model_ref: str,
        provider_id: str | None,
        provider_api_url: None,
        genai_request_timestamp: datetime | None,
    ) -> _Calculation: ...


@attrs.frozen
class _GenaiPrices:
    snapshot: _Snapshot
    usage: Callable[..., object]  # genai_prices.Usage(input_tokens=..., ...)


@functools.cache
def _genai_prices() -> _GenaiPrices:
    """genai-prices' bundled table, read once (``ImportError`` naming the extra without it)."""
    try:
        data = importlib.import_module("genai_prices.data")
        snapshots = importlib.import_module("genai_prices.data_snapshot")
        types = importlib.import_module("genai_prices.types")
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    # Our own snapshot of the bundled providers: genai_prices.calc_price would read whatever
    # snapshot the process set (UpdatePrices sets the one it fetched).
    snapshot = snapshots.DataSnapshot(providers=data.providers, from_auto_update=False)
    return _GenaiPrices(cast(_Snapshot, snapshot), types.Usage)


def _per_token(model_price: object, key: str) -> float | None:
    """A price of ``model_price`` (``input_mtok``, say) per token; the first tier's when tiered."""
    value = getattr(model_price, key, None)
    base = getattr(value, "base", value)  # TieredPrices(base, tiers)
    return float(base / _PER_PRICE) if isinstance(base, Decimal) else None


@attrs.frozen
class CatalogPrices(Prices):
    """A model's ``Prices`` from genai-prices' table: ``input``, ``output`` and ``cache_read``
    per token (USD) as they are now (the first tier's when tiered), which the ``max_cost`` check
    estimates the next call with, and ``cost``, genai-prices' price of a reply's usage.
    ``model`` is the name looked up, ``provider`` the genai-prices provider it was found in."""

    model: str = attrs.field(kw_only=True)
    provider: str = attrs.field(kw_only=True)

    def cost(self, usage: LlmUsage) -> float:
        """What genai-prices charges for ``usage``. Our ``input`` leaves out the tokens read from
        and written to the cache (they are beside it, as both providers report them); its
        ``input_tokens`` is every input token, those among them."""
        genai = _genai_prices()
        tokens = genai.usage(
            input_tokens=usage.input + usage.cache_read + usage.cache_write,
            output_tokens=usage.output,
            cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write,
        )
        return float(genai.snapshot.calc(tokens, self.model, self.provider, None, None).total_price)


class PriceCatalog(PriceLookup):
    """``prices=`` from genai-prices' table of model prices (the ``prices`` extra):
    ``YiemAgent(prices=PriceCatalog())``.

    ``catalog.get(model)`` (what pricing a reply does) and ``catalog[model]`` give the model's
    ``CatalogPrices``, found by genai-prices from the model name, among ``provider``'s models when
    it is given (a genai-prices provider id: ``"openai"``, ``"anthropic"``, ``"openrouter"``...);
    a model it does not know is a missing key, so its calls are unpriced. ``prices`` (model ->
    ``Prices`` or a dict of its fields, as ``prices=`` takes them) come before the table: your
    own models, prices you negotiated. Models are kept once looked up. ``ImportError`` naming
    the extra when genai-prices is not installed; ``ValueError`` for a provider it does not know.
    """

    def __init__(self, prices: Mapping[str, Any] | None = None, *, provider: str | None = None) -> None:
        genai = _genai_prices()
        if provider is not None:
            if not isinstance(provider, str):
                raise TypeError(f"provider must be a genai-prices provider id, got {type(provider).__name__}")
            try:
                genai.snapshot.find_provider(None, provider, None)
            except LookupError:
                raise ValueError(f"genai-prices has no provider {provider!r}") from None
        super().__init__(price_table(prices))
        self.provider = provider
        self._unknown: set[str] = set()  # names looked up and not found

    def __missing__(self, model: str) -> Prices:
        found = self._find(model)
        if found is None:
            raise KeyError(model)
        self[model] = found
        return found

    @overload
    def get(self, model: str, default: None = None, /) -> Prices | None: ...
    @overload
    def get(self, model: str, default: Prices, /) -> Prices: ...
    @overload
    def get(self, model: str, default: _T, /) -> Prices | _T: ...

    def get(self, model: str, default: Any = None, /) -> Any:
        """The prices of ``model``, else ``default``."""
        try:
            return self[model]
        except KeyError:
            return default

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.get(model) is not None

    def __bool__(self) -> bool:
        return True  # it prices every model of the table, looked up or not

    def __repr__(self) -> str:
        return f"PriceCatalog(provider={self.provider!r}, looked_up={sorted(dict.keys(self))!r})"

    def _find(self, model: object) -> CatalogPrices | None:
        if not isinstance(model, str) or not model or model in self._unknown:
            return None
        genai = _genai_prices()
        try:
            provider, info = genai.snapshot.find_provider_model(model, None, self.provider, None)
            model_price = info.get_prices(datetime.now(tz=timezone.utc))
        except LookupError:  # no such model or provider (an IndexError: a model without prices)
            model_price = None
        if model_price is not None:
            input_price = _per_token(model_price, "input_mtok")
            output_price = _per_token(model_price, "output_mtok")
            if input_price is not None or output_price is not None:  # else not priced by tokens
                return CatalogPrices(
                    input_price or 0.0,
                    output_price or 0.0,
                    _per_token(model_price, "cache_read_mtok"),
                    model=model,
                    provider=provider.id,
                )
        self._unknown.add(model)
        return None
