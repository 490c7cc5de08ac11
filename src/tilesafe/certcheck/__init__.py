"""Re-check the certificates `tilesafe verify --certificates DIR` wrote.

Why a separate package: a certificate is only worth something if its checker does not share
the prover's encoding. This package imports nothing of tilesafe's frontend, semantics,
checkers or proofs (tests/test_certificates.py checks the imports), and neither z3 nor
islpy: SMT-LIB scripts are answered by cvc5 (smt.py), state graphs by a separate
re-implementation of the PTX mbarrier rules (mbarrier.py, graph.py).
"""

from __future__ import annotations

from tilesafe.certcheck.run import Result, check_directory

__all__ = ["Result", "check_directory"]
