"""PrivPy's protocols (PrivPy §5, DESIGN §5-6): the backends, multiplication,
truncation, and the garbled-circuit runs (comparison, leading one, thresholds)."""
