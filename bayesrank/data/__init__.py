"""Data layer: LETOR readers, preference pairs, relation graphs, batching."""
