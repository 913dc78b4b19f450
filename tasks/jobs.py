"""Job functions run by the worker."""

from __future__ import annotations

from typing import Any

FUNCTIONS: list[Any] = []
CRONS: list[Any] = []
