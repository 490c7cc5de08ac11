"""tilesafe.codegen"""
