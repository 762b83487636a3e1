"""Data layer: LETOR readers, preference pairs, relation graphs, problems, batching.

Submodules: ``letor``, ``pairs``, ``graphs``, ``problem``, ``batch``, ``summary``, ``sample``.
"""
