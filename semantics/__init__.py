"""tilesafe.semantics"""
