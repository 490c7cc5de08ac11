"""tilesafe.frontend"""
