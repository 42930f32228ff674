"""What a model costs, known without importing litellm where it can be.

A run records the price of every model it uses in `RunStarted` before anything starts
(`price_snapshot`). Offline providers (`builtin/`, and those declared free) and prices from
the config need nothing else; only a model priced by litellm's bundled map imports litellm
(seconds of start-up), so a run on the offline tuner, or a warm pool's client, never pays it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from accelopt.catalog import LLM_ROLES
from accelopt.config import LLMConfig
from accelopt.records import ModelPrice

FREE_PROVIDERS = {"builtin": "builtin"}
"""Offline providers (priced at 0 with this source): this package's, and those declared free
by `declare_free_provider` (e.g. a test's scripted model)."""


def declare_free_provider(provider: str) -> None:
    """Price every `provider/<model>` at 0 (a provider served in this process that costs nothing)."""
    FREE_PROVIDERS[provider] = provider


class UnpricedModelError(ValueError):
    """Models with no price in the config nor in litellm's price map."""

    def __init__(self, models: Sequence[str]) -> None:
        self.models = list(models)
        super().__init__(
            f"no price known for model(s) {', '.join(self.models)}: set llm.prices.<model> "
            "(input_cost_per_token / output_cost_per_token, 0 allowed; on the command line --price IN OUT in USD "
            "per million tokens) or llm.allow_unpriced=true (--allow-unpriced). Self-hosted and local models have no "
            "price in litellm's map: say what they cost, even if it is 0"
        )


def provider_of(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else ""


def _litellm_price(model: str) -> ModelPrice | None:
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None
    inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
    if inp is None or out is None:
        return None
    return ModelPrice(input_cost_per_token=float(inp), output_cost_per_token=float(out), source="litellm")


def model_price(config: LLMConfig, model: str) -> ModelPrice | None:
    """The price of `model`: config, then the offline providers (0), then litellm's map."""
    if model in config.prices:
        p = config.prices[model]
        return ModelPrice(
            input_cost_per_token=p.input_cost_per_token,
            output_cost_per_token=p.output_cost_per_token,
            source="config",
        )
    free = FREE_PROVIDERS.get(provider_of(model))
    if free is not None:
        return ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source=free)
    return _litellm_price(model)


def role_models(config: LLMConfig) -> list[str]:
    return sorted({config.for_role(r).model for r in LLM_ROLES})


def price_snapshot(config: LLMConfig, models: Iterable[str] | None = None) -> dict[str, ModelPrice]:
    """Prices of `models` (default: every role's model), for `RunStarted.prices`.

    Raises `UnpricedModelError` naming the models without a price, unless `allow_unpriced`
    (then they are priced at 0 with source "unpriced").
    """
    out: dict[str, ModelPrice] = {}
    unpriced: list[str] = []
    for model in sorted(set(models) if models is not None else role_models(config)):
        price = model_price(config, model)
        if price is None:
            if not config.allow_unpriced:
                unpriced.append(model)
                continue
            price = ModelPrice(input_cost_per_token=0.0, output_cost_per_token=0.0, source="unpriced")
        out[model] = price
    if unpriced:
        raise UnpricedModelError(unpriced)
    return out
