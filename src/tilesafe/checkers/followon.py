"""Follow-on obligations: what one refutation drags along, attached to it.

Why: one planted bug cuts a temporal search short. The properties that search could then
not settle, and the consequences it ran into after the bug (a deadlock behind a wrong
parity), are not problems of their own: reported beside the bug they bury it (issue 17).
The temporal checkers (checkers/temporal.py) therefore mark such an obligation with the
code of the kernel's primary refutation (`evidence["follows from"]`) and give it a
severity below error; the reports print it under that refutation.

That is only sound while the refutation is there to carry the failure. When it is not
(its checker did not run: `verify --only barrier` on a kernel whose bug is an ownership
one), `settle` turns each follow-on back into a verdict of its own -- a refutation with
its own code, an unknown with TS490 -- so a wrong kernel never exits 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tilesafe.checkers.obligation import Obligation, Severity, Verdict

FOLLOWS_FROM = "follows from"  # evidence key: the code of the refutation it follows from
OWN_CODE = "code"  # evidence key: a follow-on refutation's own code
CUT_SHORT_BY = "cut short by"  # evidence key of a settled orphan: the code it followed
UNSETTLED_CODE = "TS490"  # an unknown on its own: the search stopped before covering it


def mark(cause: str, own_code: str | None = None) -> dict[str, str]:
    """The evidence entries that make an obligation a follow-on of the refutation `cause`
    (with `own_code`, the code a follow-on refutation would carry on its own)."""
    out = {FOLLOWS_FROM: cause}
    if own_code is not None:
        out[OWN_CODE] = own_code
    return out


def cause_of(o: Obligation) -> str | None:
    """The code of the refutation `o` follows from (None: `o` stands on its own)."""
    cause = o.evidence.get(FOLLOWS_FROM)
    return cause if isinstance(cause, str) else None


def own_code(o: Obligation) -> str | None:
    """The code `o` is reported under when it stands on its own."""
    if o.code is not None:
        return o.code
    code = o.evidence.get(OWN_CODE)
    return code if isinstance(code, str) else None


def is_cause(o: Obligation, code: str) -> bool:
    """Whether `o` is a refutation that follow-ons of `code` attach to: an error refuted
    under that code that is not itself a follow-on."""
    return (o.verdict is Verdict.REFUTED and o.severity is Severity.ERROR and o.code == code
            and cause_of(o) is None)


def settle(obligations: Sequence[Obligation]) -> list[Obligation]:
    """The obligations of one kernel with every follow-on whose cause is missing standing
    on its own (see the module docstring); the others unchanged, in the same order."""
    present = {o.code for o in obligations if o.code is not None and is_cause(o, o.code)}
    return [o if cause_of(o) is None or cause_of(o) in present else on_its_own(o)
            for o in obligations]


def on_its_own(o: Obligation) -> Obligation:
    """A follow-on as the verdict it is without its cause: it fails verification."""
    cause = cause_of(o)
    evidence = {k: v for k, v in o.evidence.items() if k not in (FOLLOWS_FROM, OWN_CODE)}
    evidence[CUT_SHORT_BY] = cause
    if o.verdict is Verdict.REFUTED:
        return replace(o, code=own_code(o) or UNSETTLED_CODE, severity=Severity.ERROR,
                       evidence=evidence)
    note = (f"; {cause}, where the search stopped, is reported by a checker that did not "
            "run" if cause else "")
    return replace(o, code=o.code or UNSETTLED_CODE, severity=Severity.ERROR,
                   message=o.message + note, evidence=evidence)
