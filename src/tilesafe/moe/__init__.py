"""Mixture-of-experts routing as an inspector-executor pair (docs/moe.md).

The inspector (`align`) turns a router's top-k expert ids into the sorted, block-padded
routing the executors in corpus/moe read; `routing` draws skewed routings for tests and GPU
cases; `reference` computes what the executors must produce, in numpy. Nothing here is
trusted by the proofs: the executors' `requires` clauses are checked on the inspector's
output at every launch (semantics/access/requires_eval.py).
"""
