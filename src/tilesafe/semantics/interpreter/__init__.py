"""tilesafe.semantics.interpreter: the reference interpreter: the scalar and lockstep engines, typed
memory, schedules and I/O."""
