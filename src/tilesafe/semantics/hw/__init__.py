"""tilesafe.semantics.hw: hardware rules and models: TMA tensor maps, wgmma descriptors and MMA
rules, the mbarrier object, shared-memory bank models."""
