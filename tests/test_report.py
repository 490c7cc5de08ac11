"""`tilesafe report` (issue 11, item 1): one self-contained HTML page with the source,
the obligations and the counterexamples drawn, checked statically and rendered in headless
Chromium (skipped where no Chromium is installed); Markdown for CI; the .tsk lexer."""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tilesafe.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "corpus" / "good"
BAD = ROOT / "corpus" / "bad"
RED = (0xD6, 0x27, 0x28)  # tilesafe/report/svg.py REFUTED

# one kernel per kind of picture
KERNELS = {
    "swimlanes": BAD / "ts410_producer_waits_full.tsk",
    "tma-box": BAD / "ts520_swizzle_layout_mismatch.tsk",
    "bank-heatmap": BAD / "ts601_transpose_conflict.tsk",
    "index": BAD / "ts201_tail_read_oob.tsk",
    "swizzle-map": GOOD / "pipeline2.tsk",
}


def cli(*args: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    code, _, err = cli("report", *KERNELS.values(), "-o", path)
    assert code == 1, err  # the bad kernels are refuted
    return path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


needs_chromium = pytest.mark.skipif(chromium() is None, reason="no Chromium installed")


def run_chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--allow-file-access-from-files", *args],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")})


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB(A) rows of an 8-bit PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    width, height, depth, color = header[0], header[1], header[2], header[3]
    assert depth == 8 and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc
                                      else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(r) for r in rows]


def count_color(path: Path, rgb: tuple[int, int, int], tol: int = 6) -> int:
    width, _, rows = png_pixels(path)
    bpp = len(rows[0]) // width
    n = 0
    for row in rows:
        for x in range(0, len(row), bpp):
            if all(abs(row[x + k] - rgb[k]) <= tol for k in range(3)):
                n += 1
    return n


# ---- static checks -------------------------------------------------------------------------


def test_report_is_self_contained(page):
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", html), "a reference leaves the file"
    assert "url(" not in html


def test_every_kind_of_picture_is_drawn_with_its_refuted_element(page):
    html = page.read_text()
    for kind in KERNELS:
        assert f'data-kind="{kind}"' in html, kind
    for kind in ("swimlanes", "tma-box", "bank-heatmap", "index", "thread-map"):
        pics = re.findall(rf'<svg class="pic" data-kind="{kind}".*?</svg>', html, re.S)
        assert pics and all('class="refuted"' in p for p in pics), kind


def test_source_has_obligation_markers_and_table(page):
    html = page.read_text()
    assert html.count('<section class="kernel"') == len(KERNELS)
    assert 'data-verdict="refuted"' in html and 'data-verdict="proved"' in html
    assert "temporal properties (one exploration)" in html
    assert re.search(r'<tr id="[^"]+" class="v-refuted">.*?TS410', html)
    assert 'class="kd">kernel<' in html  # highlighted by the .tsk lexer


def test_markdown_report(tmp_path):
    code, out, _ = cli("report", "--format", "markdown", KERNELS["index"], GOOD / "elementwise.tsk")
    assert code == 1
    assert out.startswith("## tilesafe") and "| kernel | proved | refuted | unknown |" in out
    assert "TS201" in out and "counterexample" in out and "<svg" not in out


def test_report_usage_and_warnings(tmp_path):
    code, _, _ = cli("report", GOOD / "elementwise.tsk", "-o", tmp_path / "r.html")
    assert code == 0 and (tmp_path / "r.html").exists()
    assert cli("report", tmp_path / "missing.tsk")[0] == 2


def test_lexer_knows_every_keyword_of_the_grammar():
    from tilesafe.report import lexer

    grammar = (ROOT / "src" / "tilesafe" / "grammar" / "tilesafe.lark").read_text()
    words = set(re.findall(r'"([a-z_]+)"', grammar))
    known = set(lexer.DECLARATIONS + lexer.KEYWORDS + lexer.OPERATIONS + lexer.ROLES)
    assert words <= known, sorted(words - known)
    from pygments.token import Error

    for path in sorted(GOOD.glob("*.tsk")) + sorted((GOOD.parent / "wgmma").glob("*.tsk")):
        tokens = list(lexer.TskLexer().get_tokens(path.read_text()))
        assert not [t for t in tokens if t[0] is Error], path.name


# ---- a real browser ------------------------------------------------------------------------


@needs_chromium
def test_renders_in_chromium_with_its_pictures(page, tmp_path):
    dom = run_chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = page.read_text()
    assert dom.stdout.count('<svg class="pic"') == html.count('<svg class="pic"') > 5
    assert dom.stdout.count('class="refuted"') >= 5
    shot = tmp_path / "page.png"
    r = run_chromium("--window-size=1400,2400", f"--screenshot={shot}", page.as_uri())
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    width, height, _ = png_pixels(shot)
    assert (width, height) == (1400, 2400)


@needs_chromium
def test_pictures_show_the_refuted_element_in_chromium(page, tmp_path):
    """Each counterexample picture alone on a page: Chromium paints its refuted element
    (red pixels), and a picture of a proved layout has none."""
    html = page.read_text()
    for kind in ("swimlanes", "tma-box", "bank-heatmap", "index"):
        pic = re.search(rf'<svg class="pic" data-kind="{kind}".*?</svg>', html, re.S).group(0)
        one = tmp_path / f"{kind}.html"
        one.write_text(f"<!DOCTYPE html><html><body style='margin:0'>{pic}</body></html>")
        shot = tmp_path / f"{kind}.png"
        r = run_chromium("--window-size=1600,1000", f"--screenshot={shot}", one.as_uri())
        assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
        assert count_color(shot, RED) > 20, kind
    pic = re.search(r'<svg class="pic" data-kind="swizzle-map".*?</svg>', html, re.S).group(0)
    assert 'class="refuted"' not in pic


@pytest.mark.slow
@needs_chromium
def test_whole_corpus_report_renders(tmp_path):
    """Every good and bad corpus kernel in one report, rendered by Chromium (slow: it
    verifies the whole corpus; TILESAFE_SLOW=1 or -m slow)."""
    path = tmp_path / "corpus.html"
    cli("report", GOOD, BAD, "-o", path)
    html = path.read_text()
    files = sorted(GOOD.glob("*.tsk")) + sorted(BAD.glob("*.tsk"))
    dom = run_chromium("--dump-dom", path.as_uri())
    assert dom.returncode == 0
    for f in files:
        assert str(f.relative_to(ROOT)) in html or str(f) in html, f.name
    assert dom.stdout.count('<svg class="pic"') == html.count('<svg class="pic"')


def test_lexer_is_a_pygments_plugin():
    """pyproject registers it (entry point pygments.lexers), so docs and editors find it."""
    from pygments.lexers import get_lexer_by_name, get_lexer_for_filename

    from tilesafe.report.lexer import TskLexer

    assert isinstance(get_lexer_by_name("tsk"), TskLexer)
    assert isinstance(get_lexer_for_filename("kernel.tsk"), TskLexer)


def test_report_of_standard_input_shows_its_source():
    text = (GOOD / "elementwise.tsk").read_text()
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", "-", "--only", "access"], stdout=out, stderr=err,
                stdin=io.StringIO(text))
    assert code == 0, err.getvalue()
    assert "&lt;stdin&gt;" in out.getvalue() and 'class="ln">12<' in out.getvalue()
