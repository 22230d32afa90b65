"""Tests here build network namespaces and start processes: a SIGTERM still removes them."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _cleanup_on_sigterm(sigterm_cleans_up: None) -> None:
    """Every module here runs with `sigterm_cleans_up` (tests/conftest.py)."""
