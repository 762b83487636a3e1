"""Posterior inference: EP with two-dimensional sites (``ep``), the Laplace approximation
(``laplace``) and NUTS in NumPyro (``nuts``), behind one prediction face (``posterior``).

``nuts`` is not imported here (it loads NumPyro); ``from bayesrank.inference import nuts`` does.
"""

from . import ep, laplace, posterior

__all__ = ["ep", "laplace", "nuts", "posterior"]
