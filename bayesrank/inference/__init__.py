"""Posterior inference: EP with two-dimensional sites (``ep``), the Laplace approximation
(``laplace``) and NUTS in NumPyro (``nuts``), behind one prediction face (``posterior``); the
Gaussian site algebra that EP and Laplace share (``gaussian``).

``nuts`` is not imported here (it loads NumPyro); ``from bayesrank.inference import nuts`` does.
"""

from . import ep, gaussian, laplace, posterior

__all__ = ["ep", "gaussian", "laplace", "nuts", "posterior"]
