"""Posterior inference: EP with two-dimensional sites (``ep``)."""

from . import ep

__all__ = ["ep"]
