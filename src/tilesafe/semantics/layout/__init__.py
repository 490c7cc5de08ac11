"""tilesafe.semantics.layout: shared-memory layouts: CuTe int-tuples and algebra, swizzles, F2
linear, LEGO tilings, piecewise layouts, their ISL lowering and swizzle synthesis."""
