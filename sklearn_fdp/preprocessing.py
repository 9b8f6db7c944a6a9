"""Private preprocessing transformers."""

from ._preprocessing import PrivateMeanCenterer

__all__ = ["PrivateMeanCenterer"]
