"""Deprecated module: ``one_blas_thread`` lives in ``bayesrank.runtime``."""

from ._moved import moved

__getattr__ = moved(__name__, {"one_blas_thread": "bayesrank.runtime"})
