"""Reliability: faults injected into every layer; spec/reliability.md says what each test proves."""

import pkgutil

import pytest

# The cases' checks live in this package's modules: pytest rewrites their asserts too, so a failing
# case shows the values it compared.
pytest.register_assert_rewrite(*(f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__)))
