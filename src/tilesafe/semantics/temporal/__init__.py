"""tilesafe.semantics.temporal: the event model of one block and its explicit-state exploration
(explore/), the every-trip-count argument, symmetry, rings, persistent kernels, synchronisation
counts, footprints, counterexamples."""
