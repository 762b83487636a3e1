"""Posterior inference: EP with two-dimensional sites (``ep``) and NUTS in NumPyro (``nuts``),
behind one prediction face (``posterior``).

``nuts`` is not imported here (it loads NumPyro); ``from bayesrank.inference import nuts`` does.
"""

from . import ep, posterior

__all__ = ["ep", "nuts", "posterior"]
