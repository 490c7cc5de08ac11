"""tilesafe.semantics.value: the value proof of `ensures` clauses (value terms, the value space,
rings, fragments, gathers), its refuting search, and kernel equivalence."""
