"""bayesrank: Bayesian preference learning in JAX."""

__version__ = "0.1.0.dev0"
