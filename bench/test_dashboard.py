#!/usr/bin/env python3
"""Tests of bench/dashboard on two synthetic runs, the second on a machine 10% faster throughout
with one benchmark at half its speed.

  test_dashboard.py png       the page and PNGs are written, self-contained, and the plots drawn;
                              the figures are ratios within a run (a uniformly faster machine
                              changes none of them) and the flags are bench/compare's
  test_dashboard.py chromium  headless Chromium renders the page to a screenshot that is not blank

Exits 77 (ctest's SKIP_RETURN_CODE) when matplotlib, or for `chromium` the browser, is missing.
"""

import base64
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import test_compare  # noqa: E402  (its synthetic results)

SKIP = 77


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def fail(why):
    print(f"FAILED: {why}")
    sys.exit(1)


def image(path):
    import matplotlib.image

    return matplotlib.image.imread(str(path))


def check_drawn(path, min_width):
    """A plot, not an empty canvas: big enough, and many pixels differ from the background."""
    pixels = image(path)
    height, width = pixels.shape[:2]
    if width < min_width or height < 200:
        fail(f"{path} is only {width}x{height}")
    background = pixels[0, 0]
    differing = (abs(pixels[..., :3] - background[:3]).sum(axis=-1) > 0.05).mean()
    colors = len({tuple(p) for p in pixels[::7, ::7, :3].reshape(-1, 3).round(2).tolist()})
    print(f"{path.name}: {width}x{height}, {differing:.1%} of pixels off the background, {colors} colors")
    if differing < 0.02 or colors < 8:
        fail(f"{path} looks blank")


def make_dashboard(work):
    runs = work / "runs"
    runs.mkdir()
    first = test_compare.results()
    first["context"].update(date="2026-11-30T09:00:00+00:00", logprobs_commit="1111aaa")
    second = test_compare.results(scale=1.1, slow=test_compare.CompareTest.SLOW, slow_factor=0.5)
    second["context"].update(date="2026-11-30T10:00:00+00:00")  # commit from the file name
    (runs / "run-1111aaa.json").write_text(json.dumps(first))
    (runs / "2222bbb.json").write_text(json.dumps(second))
    out = work / "out"
    result = subprocess.run([sys.executable, str(HERE / "dashboard"), str(runs), str(out)], capture_output=True,
                            text=True, timeout=120)
    print(result.stdout + result.stderr, end="")
    if result.returncode != 0:
        fail(f"dashboard exited {result.returncode}")
    return out


def test_png(out):
    page = (out / "index.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    if len(embedded) != 2:
        fail(f"index.html embeds {len(embedded)} PNGs, want 2")
    if re.search(r'(src|href)="(?!data:)', page):
        fail("index.html refers to something outside itself")
    for name, data in zip(("levels.png", "commits.png"), embedded):
        if base64.b64decode(data) != (out / name).read_bytes():
            fail(f"the page's {name} differs from the file")
        check_drawn(out / name, min_width=600)
    for commit in ("1111aaa", "2222bbb"):
        if commit not in page:
            fail(f"commit {commit} is not on the page")


def load_dashboard():
    loader = importlib.machinery.SourceFileLoader("dashboard", str(HERE / "dashboard"))
    spec = importlib.util.spec_from_loader("dashboard", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_ratios_and_flags(out, work):
    """What commits.png and the history table show: ratios that a machine uniformly faster
    leaves unchanged, and red exactly where bench/compare flags a regression."""
    dashboard = load_dashboard()
    from benchjson import Run, compare

    slow = test_compare.CompareTest.SLOW
    base = Run(test_compare.results())
    faster = Run(test_compare.results(scale=1.3))
    halved = Run(test_compare.results(scale=1.3, slow=slow, slow_factor=0.5))
    for run in (base, faster, halved):
        run.commit = "x"
    for (rows, vocab) in test_compare.SHAPES:
        for target in test_compare.TARGETS:
            for figure in (dashboard.fraction, dashboard.max_ratio):
                a, b = (dashboard.commit_series([r], figure, target, rows, vocab, 2)[0] for r in (base, faster))
                if a is None or abs(a / b - 1) > 1e-12:
                    fail(f"{figure.__name__} of {target} at {rows}x{vocab}: {a} vs {b} on a uniformly faster machine")
    # A run named before the k and dtype dimensions, beside a new one that also times a K the old
    # one lacks (far faster): both show the same figures, over what they share.
    newer = test_compare.results()
    newer["benchmarks"].append(dict(newer["benchmarks"][1], name="cpu/rows:64/vocab:128256/k:20/dtype:f32/"
                                    "dist:normal/threads:2/real_time", run_name="cpu/rows:64/vocab:128256/k:20/dtype:f32/dist:normal/"
                                    "threads:2/real_time", bytes_per_second=1e12))
    # A series with an optional part (logprobs-bench --temperatures) is not a plain one.
    newer["benchmarks"].append(dict(newer["benchmarks"][1], name="cpu/rows:64/vocab:128256/k:0/dtype:f32/"
                                    "dist:normal/threads:2/temperature:0.7/real_time",
                                    run_name="cpu/rows:64/vocab:128256/k:0/dtype:f32/dist:normal/threads:2/"
                                    "temperature:0.7/real_time", bytes_per_second=1e12))
    old, new = Run(test_compare.results(old_names=True)), Run(newer)
    if any("temperature" in e.key for e in dashboard.entries(new)):
        fail("a series with temperatures is plotted among the plain ones")
    for (rows, vocab) in test_compare.SHAPES:
        a, b = dashboard.commit_series([old, new], dashboard.fraction, "cpu", rows, vocab, 2)
        if a is None or abs(a / b - 1) > 1e-12:
            fail(f"old and new names at {rows}x{vocab}: {a} vs {b}")
    flags = dashboard.regression_flags([base, faster, halved], None, 0.10)
    for anchor in ("stream", "max"):
        want = {r["key"] for r in compare(halved, faster, anchor, 0.10)[1]}
        if set(flags[2][anchor]) != want or want != {slow}:
            fail(f"flags against the run before ({anchor}): {sorted(flags[2][anchor])}, bench/compare: {sorted(want)}")
        if flags[0][anchor] or flags[1][anchor]:
            fail(f"flags where bench/compare sees no regression ({anchor}): {flags[0][anchor]} {flags[1][anchor]}")
    # Against a fixed baseline every later run is judged alike.
    against_base = dashboard.regression_flags([faster, halved], base, 0.10)
    if against_base[0]["stream"] or set(against_base[1]["stream"]) != {slow}:
        fail(f"flags against the baseline: {against_base}")

    page = (out / "index.html").read_text()
    flagged = re.findall(r'<tr><td class="key">([^<]*)</td>(.*?)</tr>', page)
    red = [key for key, cells in flagged if 'class="flagged"' in cells]
    if red != [slow]:
        fail(f"the history table marks {red}, want [{slow}]")
    if "REGRESSION (stream -50%, max -50%)" not in page:
        fail("the flagged cell does not give the changes bench/compare measured")
    if "GB/s per levels" in page or "logits GB/s" in page:
        fail("the page still titles a figure in raw GB/s")


def test_chromium(out, work):
    browser = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        skip("chromium is not installed (apt-get install chromium; deliberately not in ci/install-deps)")
    shot = work / "screenshot.png"
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={work / 'profile'}",
           f"--screenshot={shot}", "--window-size=1200,1600", (out / "index.html").resolve().as_uri()]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0 or not shot.exists():
        fail(f"chromium exited {result.returncode} without a screenshot:\n{result.stderr[-2000:]}")
    check_drawn(shot, min_width=1200)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("png", "chromium"):
        print(__doc__)
        return 2
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        skip(f"matplotlib is not importable by {sys.executable} (apt-get install python3-matplotlib)")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        out = make_dashboard(work)
        if sys.argv[1] == "png":
            test_png(out)
            test_ratios_and_flags(out, work)
        else:
            test_chromium(out, work)
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
