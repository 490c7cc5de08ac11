"""Mutation testing of the checkers (issue 12): plant one bug at a time in a kernel that
verifies, and measure whether `verify` notices.

sites.py walks the syntax tree, operators.py proposes edits, generate.py prints and lints
the mutants, sizes.py/differential.py run survivors against the original on the reference
interpreter, worker.py/pool.py classify mutants in bounded child processes, campaign.py
samples, shards and scores, report.py and baseline.py write the results.
"""
