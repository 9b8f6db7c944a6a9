"""Preprocessing: private (PrivateMeanCenterer) and data-independent (BoundedScaler)."""

from ._bounded import BoundedScaler
from ._preprocessing import PrivateMeanCenterer

__all__ = ["BoundedScaler", "PrivateMeanCenterer"]
