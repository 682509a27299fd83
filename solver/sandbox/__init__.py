"""Code execution: the pool (parent side) and the isolated worker it starts."""
