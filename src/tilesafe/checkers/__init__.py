"""tilesafe.checkers"""
