"""LLM provider clients: one class per wire format, created from an endpoint's config.

``create(EndpointConfig(...))`` gives a :class:`Provider` whose ``complete`` returns one
:class:`~generators.llm.LLMCall` per request, retries, limits and billing included (the rules are
in :mod:`generators.providers.base`).
"""

from generators.providers.base import (
    AttemptRecord,
    EndpointConfig,
    Provider,
    ProviderConfigError,
    attempt_records,
)
from generators.providers.pricing import Cost, ModelPrice, PriceError, PriceTable
from generators.providers.registry import create, provider_class, provider_kinds, register_provider

__all__ = [
    "AttemptRecord", "Cost", "EndpointConfig", "ModelPrice", "PriceError", "PriceTable", "Provider",
    "ProviderConfigError", "attempt_records", "create", "provider_class", "provider_kinds",
    "register_provider",
]
