"""tilesafe.semantics.access.access: access relations of global and shared memory, coverage, gathers
through index tensors, global-memory races, TMA boxes outside their tensor."""
