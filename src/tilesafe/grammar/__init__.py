"""Grammar files (data package)."""
