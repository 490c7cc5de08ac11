"""tilesafe.proofs"""
