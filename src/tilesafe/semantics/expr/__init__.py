"""tilesafe.semantics.expr: the meaning of IR expressions and its symbolic algebras (ISL, z3), exact
arithmetic, facts about products and specialisations."""
