"""Posterior inference: EP with two-dimensional sites (``ep``) and NUTS in NumPyro (``nuts``).

``nuts`` is not imported here (it imports :mod:`bayesrank.predict`, which imports ``ep``);
``from bayesrank.inference import nuts`` loads it.
"""

from . import ep

__all__ = ["ep", "nuts"]
