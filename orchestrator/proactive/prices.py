"""Prices of model calls: the price table's keys, the cost of one call, a price that is missing."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.llm.types import Usage
from orchestrator.proactive.config import Price


class PriceMissing(LookupError):
    """A money budget applies to a model the price table does not list: the operator must add it."""

    def __init__(self, model: str, setting: str) -> None:
        self.model = model
        self.setting = setting
        keys = " or ".join(repr(key) for key in price_keys(model))
        super().__init__(
            f"no price for model {model!r} while autonomy.budgets.{setting}.usd is set: add "
            f"autonomy.prices[{keys}] with input_per_mtok and output_per_mtok (USD per million tokens), "
            f"or remove the usd budget"
        )


def price_keys(model: str) -> tuple[str, ...]:
    """Keys tried in the price table: ``provider/model`` as given, then the model without its provider."""
    if "/" in model:
        return (model, model.split("/", 1)[1])
    return (model,)


def find_price(prices: Mapping[str, Price], model: str) -> Price | None:
    return next((prices[key] for key in price_keys(model) if key in prices), None)


def price_of(price: Price, usage: Usage, *, cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
    """USD for one call; cache tokens are those a provider reports apart from ``input_tokens``."""
    cache_read = price.input_per_mtok if price.cache_read_per_mtok is None else price.cache_read_per_mtok
    cache_write = price.input_per_mtok if price.cache_write_per_mtok is None else price.cache_write_per_mtok
    micro_usd = (
        usage.input_tokens * price.input_per_mtok
        + usage.output_tokens * price.output_per_mtok
        + cache_read_tokens * cache_read
        + cache_write_tokens * cache_write
    )
    return micro_usd / 1_000_000
