"""The CLI fuzzer: generated .tsk files through `tilesafe lint`, `fmt`, `verify` and `run`,
each command in a worker subprocess under an address-space limit and a per-case time
limit. The target: no exit 3 ("internal error", a bug) and no crashed worker, ever; exit
0, 1 and 2 are all fine answers to a fuzzed input, and a timeout is reported, not failed.

    python tests/fuzz_cli.py --cases 10000 --workers 2 --out /tmp/tilesafe-fuzz

Why workers instead of one `tilesafe` process per case: starting Python with islpy, z3 and
numpy costs about a second, which would make 10,000 cases a day's work. A worker runs
`tilesafe.cli.main` in-process case after case and is replaced after a timeout or a crash
(its state may be half-updated). `RLIMIT_AS` caps each worker's memory, so a case that
allocates without bound ends as a MemoryError (exit 3: a finding) instead of taking the
machine down; SIGALRM ends a case past its time, and the parent kills a worker stuck in C
code.

Each case is reproducible from (seed, index): `--only INDEX` reruns one, and every exit-3
or crashed case is written to the output folder with its command and error.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.util
import json
import os
import random
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _load_inputs():
    """tests/ is not a package: load fuzz_inputs.py by path."""
    spec = importlib.util.spec_from_file_location("fuzz_inputs", HERE / "fuzz_inputs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_inputs", module)
    spec.loader.exec_module(module)
    return module


_INPUTS = _load_inputs()
SEEDS: list[str] = _INPUTS.SEEDS
VOCAB: list[str] = _INPUTS.VOCAB
tokens: Callable[[str], list[str]] = _INPUTS.tokens

# Per command: the argument lists a case picks from ("{file}" is the case's file) and the
# time limit in seconds. `run` gets sizes (and a kernel) chosen by the worker.
COMMANDS: dict[str, tuple[list[list[str]], float]] = {
    "lint": ([["lint", "{file}"], ["lint", "{file}", "--format", "json"]], 20.0),
    "fmt": ([["fmt", "--check", "{file}"], ["fmt", "--diff", "{file}"], ["fmt", "{file}"]],
            20.0),
    "verify": ([["verify", "{file}"], ["verify", "{file}", "--format", "json"],
                ["verify", "{file}", "--format", "sarif"]], 60.0),
    "run": ([["run", "{file}"], ["run", "{file}", "--format", "json"]], 60.0),
}
GRACE = 30.0  # seconds past a case's limit before the parent kills its worker
BOUNDARY = [0, 1, 2, 3, 7, 8, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 1023, 1024, 1025,
            2048, 65535, 65536, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**30]
SIZE_VALUES = [1, 2, 3, 8, 31, 32, 64, 65, 96, 128, 192, 256]
HUGE_SIZES = [65536, 2**20, 2**31, 2**40]


@dataclasses.dataclass(frozen=True)
class Case:
    index: int
    generator: str
    command: str  # a key of COMMANDS
    argv: tuple[str, ...]
    text: str
    timeout: float


@dataclasses.dataclass(frozen=True)
class Outcome:
    case: Case
    status: str  # "0", "1", "2", "3", "timeout" or "crash"
    seconds: float
    detail: str = ""  # stderr of exit 3, or why the worker died


# ---- generating inputs ---------------------------------------------------------------------


def mutate_tokens(rng: random.Random) -> str:
    """A corpus file with 1-4 token edits (delete, duplicate, swap, insert, replace)."""
    toks = tokens(rng.choice(SEEDS))
    for _ in range(rng.randint(1, 4)):
        if not toks:
            break
        i = rng.randrange(len(toks))
        kind = rng.choice(["delete", "duplicate", "swap", "insert_char", "insert_token",
                           "replace"])
        if kind == "delete":
            del toks[i]
        elif kind == "duplicate":
            toks.insert(i, toks[i])
        elif kind == "swap":
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif kind == "insert_char":
            toks.insert(i, chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 32),
                                           rng.randrange(0x80, 0x3000)])))
        elif kind == "insert_token":
            toks.insert(i, rng.choice(VOCAB))
        else:
            toks[i] = rng.choice(VOCAB)
    return "".join(toks)


_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")


def mutate_values(rng: random.Random) -> str:
    """A corpus file whose numbers, roles, bounds or modes are pushed to their edges: what
    still parses and resolves, so verify and run see it."""
    text = rng.choice(SEEDS)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["int", "int", "int", "role", "where", "swizzle", "block"])
        if kind == "int":
            spots = list(_INT.finditer(text))
            if spots:
                m = rng.choice(spots)
                text = text[:m.start()] + str(rng.choice(BOUNDARY)) + text[m.end():]
        elif kind == "role":
            text = re.sub(r": (in |out |inout )?global",
                          lambda m: ": " + rng.choice(["", "in ", "out ", "inout "]) + "global",
                          text, count=rng.randint(1, 3))
        elif kind == "where":
            text = re.sub(r",\s*[MN] <= \d+", "", text, count=1)
        elif kind == "swizzle":
            text = re.sub(r"swizzle\d+B\(", rng.choice(["swizzle32B(", "swizzle64B(",
                                                       "swizzle128B(", "swizzle(3, 4, 3, "]),
                          text, count=1)
        else:
            text = re.sub(r"block \d+", f"block {rng.choice([1, 32, 33, 64, 1024, 1025])}",
                          text, count=1)
    return text


def structural(rng: random.Random) -> str:
    """Shapes of text the token edits never reach: deep nesting, long chains, long lines,
    many comments, byte-order marks, CRLF, tabs, control characters."""
    base = rng.choice(SEEDS)
    kind = rng.choice(["nest", "chain", "comments", "bom", "crlf", "tabs", "control",
                       "long_line"])
    if kind in ("nest", "chain"):
        depth = rng.choice([1, 10, 50, 97, 98, 99, 100, 101, 150, 300])
        if kind == "nest":
            opener = rng.choice(["if thread < {i} {{\n", "for i{i} in 0 .. 1 {{\n",
                                 "if thread >= 0 {{\n}} else {{\n"])
            body = "".join(opener.format(i=i + 1) for i in range(depth))
            body += "x[thread] = 1.0\n" + "}\n" * depth
        else:
            op = rng.choice([" + ", " - ", " * 1 + ", " && thread < "])
            terms = op.join(["thread"] * depth)
            body = (f"if {terms} > 0 {{ x[thread] = 1.0 }}\n" if "&&" not in op
                    else f"if thread < {terms} {{ x[thread] = 1.0 }}\n")
        return (f"kernel k(x: out global f32[N])\n  where N == 64\n  grid 1 block 64\n{{\n"
                f"{body}}}\n")
    if kind == "comments":
        line = rng.choice(["// c\n", "/* c */\n", "/* a\n b */\n", "//" + "x" * 500 + "\n"])
        return base + line * rng.choice([10, 1000, 20000])
    if kind == "bom":
        return "\ufeff" + base
    if kind == "crlf":
        return base.replace("\n", "\r\n")
    if kind == "tabs":
        return re.sub(r"^( +)", lambda m: "\t" * (len(m.group(1)) // 2), base, flags=re.M)
    if kind == "control":
        at = rng.randrange(len(base) + 1)
        junk = "".join(chr(rng.choice([0, 7, 8, 11, 12, 27, 127, 0x85, 0x2028, 0x202E,
                                       0xFEFF])) for _ in range(rng.randint(1, 4)))
        return base[:at] + junk + base[at:]
    filler = " + ".join(["thread"] * rng.choice([10, 90]))
    return base.replace("{\n", "{\n  let zz_long = " + filler + " // " + "y" * 3000 + "\n",
                        1)


def token_soup(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(0, 80)))


GENERATORS: list[tuple[str, Callable[[random.Random], str], int]] = [
    ("values", mutate_values, 40), ("tokens", mutate_tokens, 30),
    ("structural", structural, 20), ("soup", token_soup, 10),
]


def make_case(seed: int, index: int) -> Case:
    """Case `index` of a run: a text, then one command on it; cases 4k .. 4k+3 share one
    text and run lint, fmt, verify and run on it."""
    text_rng = random.Random(f"{seed}/{index // 4}")
    names, gens, weights = zip(*GENERATORS, strict=True)
    pick = text_rng.choices(range(len(gens)), weights)[0]
    text = gens[pick](text_rng)
    command = list(COMMANDS)[index % 4]
    rng = random.Random(f"{seed}/{index}")
    choices, timeout = COMMANDS[command]
    return Case(index, names[pick], command, tuple(rng.choice(choices)), text, timeout)


def cases(seed: int, count: int, only: int | None = None) -> Iterator[Case]:
    if only is not None:
        yield make_case(seed, only)
        return
    for index in range(count):
        yield make_case(seed, index)


# ---- the worker ----------------------------------------------------------------------------


class _Timeout(BaseException):
    """Raised by SIGALRM; a BaseException so the CLI's `except Exception` lets it through."""


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


def _run_sizes(path: Path, rng: random.Random) -> list[str]:
    """`--size` (and `--kernel`) that satisfy the kernel's `where`, when small ones exist;
    anything the harness cannot work out falls back to sizes run will refuse (exit 2)."""
    try:
        from tilesafe import api
        from tilesafe.semantics.interpreter.interp_io import check_where

        kernel = rng.choice(api.load(path).kernels)
        extra = ["--kernel", kernel.name, "--seed", str(rng.randrange(4))]
        if rng.random() < 0.1:  # sizes past what the machine holds: refused, never exit 3
            huge = ",".join(f"{n}={rng.choice(HUGE_SIZES)}" for n in kernel.sizes)
            return extra + (["--size", huge] if huge else [])
        for _ in range(200):
            sizes = {n: rng.choice(SIZE_VALUES) for n in kernel.sizes}
            try:
                check_where(kernel, sizes)
            except Exception:  # noqa: BLE001 - any refusal: try other sizes
                continue
            given = ",".join(f"{k}={v}" for k, v in sizes.items())
            return extra + (["--size", given] if given else [])
        return extra + ["--size", ",".join(f"{n}=1" for n in kernel.sizes)]
    except Exception:  # noqa: BLE001 - the file does not load: run reports that itself
        return ["--size", "N=64"]


def worker() -> None:
    """Read cases (JSON lines) on stdin, answer outcomes (JSON lines) on the original
    stdout; everything else anyone prints goes to stderr."""
    import io

    from tilesafe.cli import main

    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGALRM, _alarm)
    folder = Path(tempfile.mkdtemp(prefix="tilesafe-fuzz-"))
    for line in sys.stdin:
        job = json.loads(line)
        path = folder / "case.tsk"
        path.write_bytes(job["text"].encode("utf-8", "surrogatepass"))
        argv = [str(path) if a == "{file}" else a for a in job["argv"]]
        if argv[0] == "run":
            argv += _run_sizes(path, random.Random(job["index"]))
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        # repeating every 50 ms until cancelled: a SIGALRM that lands inside a __del__ (ISL
        # frees objects all the time) raises where Python only prints and ignores it
        signal.setitimer(signal.ITIMER_REAL, job["timeout"], 0.05)
        try:
            status = str(main(argv, stdout=out, stderr=err))
        except _Timeout:
            status = "timeout"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = time.perf_counter() - start
        detail = err.getvalue()[-2000:] if status == "3" else ""
        channel.write(json.dumps({"status": status, "seconds": seconds, "detail": detail,
                                  "argv": argv}) + "\n")
        if status == "timeout":
            return  # state may be half-updated: the parent starts a fresh worker


# ---- the parent ----------------------------------------------------------------------------


class _Worker:
    def __init__(self, mem_mb: int, log: Path):
        def limit() -> None:
            cap = mem_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        env = {**os.environ, "PYTHONHASHSEED": "0"}
        env.pop("TILESAFE_DEBUG", None)
        self.log = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, preexec_fn=limit, cwd=ROOT, env=env)

    def ask(self, case: Case) -> tuple[str, float, str]:
        job = {"index": case.index, "argv": list(case.argv), "text": case.text,
               "timeout": case.timeout}
        start = time.perf_counter()
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return "crash", 0.0, "worker gone before the case"
        ready, _, _ = select.select([self.proc.stdout], [], [], case.timeout + GRACE)
        if not ready:
            self.kill()
            return "timeout", time.perf_counter() - start, "killed: stuck past its limit"
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            return "crash", time.perf_counter() - start, f"worker exited with {code}"
        answer = json.loads(line)
        return answer["status"], answer["seconds"], answer["detail"]

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.alive:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


def fuzz(seed: int = 0, count: int = 10_000, workers: int = 2, mem_mb: int = 3072,
         out: Path | None = None, only: int | None = None,
         progress: Callable[[int, collections.Counter], None] | None = None) -> list[Outcome]:
    """Run `count` cases on `workers` worker processes; returns every outcome. Exit-3 and
    crashed cases are written to `out` (when given) as NNNNN.tsk + NNNNN.txt."""
    import threading

    out = out or Path(tempfile.mkdtemp(prefix="tilesafe-fuzz-out-"))
    out.mkdir(parents=True, exist_ok=True)
    todo = list(cases(seed, count, only))
    todo.reverse()
    lock = threading.Lock()
    outcomes: list[Outcome] = []
    tally: collections.Counter = collections.Counter()

    def drive(slot: int) -> None:
        w = _Worker(mem_mb, out / f"worker{slot}.log")
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    case = todo.pop()
                if not w.alive:  # it crashed on the previous case
                    w.close()
                    w = _Worker(mem_mb, out / f"worker{slot}.log")
                status, seconds, detail = w.ask(case)
                if status == "timeout":  # the worker quits (or was killed): replace it
                    w.close()
                    w = _Worker(mem_mb, out / f"worker{slot}.log")
                outcome = Outcome(case, status, seconds, detail)
                if status in ("3", "crash"):
                    _save(out, outcome)
                with lock:
                    outcomes.append(outcome)
                    tally[status] += 1
                    if progress is not None:
                        progress(len(outcomes), tally)
        finally:
            w.close()

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes, key=lambda o: o.case.index)


def _save(out: Path, o: Outcome) -> None:
    stem = out / f"{o.case.index:05d}"
    stem.with_suffix(".tsk").write_bytes(o.case.text.encode("utf-8", "surrogatepass"))
    stem.with_suffix(".txt").write_text(
        f"status {o.status}\ngenerator {o.case.generator}\nargv {' '.join(o.case.argv)}\n"
        f"seconds {o.seconds:.2f}\n\n{o.detail}\n", encoding="utf-8")


def summary(outcomes: list[Outcome], seconds: float) -> dict[str, object]:
    """Histograms of exit status: overall, per command and per generator; the slowest."""
    by_command: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    by_generator: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        by_command[o.case.command][o.status] += 1
        by_generator[o.case.generator][o.status] += 1
    slowest = sorted(outcomes, key=lambda o: -o.seconds)[:5]
    return {
        "cases": len(outcomes), "seconds": round(seconds, 1),
        "status": dict(sorted(collections.Counter(o.status for o in outcomes).items())),
        "by_command": {k: dict(sorted(v.items())) for k, v in sorted(by_command.items())},
        "by_generator": {k: dict(sorted(v.items())) for k, v in sorted(by_generator.items())},
        "failures": [o.case.index for o in outcomes if o.status in ("3", "crash")],
        "slowest": [{"index": o.case.index, "argv": " ".join(o.case.argv),
                     "status": o.status, "seconds": round(o.seconds, 1)} for o in slowest],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mem-mb", type=int, default=3072, help="address-space limit per worker")
    p.add_argument("--out", type=Path, help="folder for failing cases and the summary")
    p.add_argument("--only", type=int, help="run just this case index")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker()
        return 0
    start = time.perf_counter()

    def progress(done: int, tally: collections.Counter) -> None:
        if done % 250 == 0:
            print(f"{done} cases, {time.perf_counter() - start:.0f} s: {dict(tally)}",
                  flush=True)

    out = args.out or Path(tempfile.mkdtemp(prefix="tilesafe-fuzz-out-"))
    outcomes = fuzz(args.seed, args.cases, args.workers, args.mem_mb, out, args.only,
                    progress)
    result = summary(outcomes, time.perf_counter() - start)
    (out / "summary.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))
    print(f"failing cases and worker logs in {out}")
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
