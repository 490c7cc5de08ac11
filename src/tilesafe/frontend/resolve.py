"""The resolver's entry point (the rules live in frontend/resolver/)."""

from tilesafe.frontend.resolver import resolve

__all__ = ["resolve"]
