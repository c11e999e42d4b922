#!/usr/bin/env python3
"""ci/mutants and its mutation sites (the ctest mutants_check_itself).

The sites: binary operators are told from template brackets and references, comments, strings
and directives are never mutated, statements are deleted only in function bodies. The tool, on a
toy checkout (a backend folder with a test, a stand-in logprobs-check whose campaign checks what
the test does not): each kind of result (killed by the test, by the campaign, by a crash, by a
timeout; survived; stillborn; equivalent) with the diff in the JSON; the options checked; the
report written safely; and the checkout byte for byte unchanged after a run, after SIGINT and
SIGTERM mid-mutant (exit 128 + N, a valid report that --resume completes) and after SIGKILL (the
scratch copy the kill left mutated is restored by the next run).
"""
import hashlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "ci" / "mutants"
sys.path.insert(0, str(ROOT / "ci"))
import mutation_sites  # noqa: E402

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def sites(code):
    return [(m.operator, m.original, m.replacement) for m in mutation_sites.find_mutants(code, "x.cpp")]


def operators(code):
    return [m[0] for m in sites(code)]


def test_sites():
    check(operators("bool f(int a, int b) { return a < b; }") == ["lt_to_le"], "a < b is one site")
    check(operators("std::vector<std::atomic<int>> v; template <typename T> T&& g(T&& x);") == [],
          "template brackets and references are not operators")
    check(operators("// a < b && c\n/* x > y */ const char* s = \"a < b\"; char c = '<';") == [],
          "comments, strings and characters are not mutated")
    check(operators("#if A > 1\n#include <vector>\n#define M(x) (x < 2 && \\\n  x > 1)\n#endif\n") == [],
          "preprocessor lines, continued ones too, are not mutated")
    check(operators("static_assert(kN < 64, \"fits\");") == [], "static_assert is left alone")
    check(operators("float m = std::numeric_limits<float>::max();") == [], "numeric_limits<T>::max() is a constant")
    check(sites("int f(int a, int b) { return std::min(a, b) + hn::Max(a, b); }")[:2] ==
          [("min_to_max", "min", "max"), ("max_to_min", "Max", "Min")], "std::min and hn::Max swap")
    check(sites("int f(int i) { return i + 1; }") == [("add1_to_sub1", "+", "-"), ("const_inc", "1", "2"),
                                                        ("const_dec", "1", "0")], "i + 1: the sign and the constant")
    check(sites("unsigned m = 0x7FFu; float f = 0x1p-24f; double d = 1.5e3;") ==
          [("const_inc", "0x7FFu", "0x800u"), ("const_dec", "0x7FFu", "0x7feu")],
          "hexadecimal integers keep their base and suffix; floating literals are not mutated")
    check(operators("int x = -1;") == ["const_inc", "const_dec"], "unary minus is not a site of sub1_to_add1")
    code = """
namespace n {
int g_count = 0;
struct S { int a; void f() { a = 1; } };
void body(std::vector<int>& v, int* p) {
  v.push_back(2);
  int local = 3;
  const auto k = v.size();
  ++local;
  if (local) v.clear();
  if (local) v.pop_back(); else v.clear();
  for (int i = 0; i < 2; ++i) v.push_back(i);
  auto l = [&](int x) { v.push_back(x); return x; };
  std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
  for (std::size_t m = 0; m < (std::size_t{1} << 3); ++m) {
    p[m] = 0;
  }
  return;
}
}  // namespace n
"""
    deleted = [m.original for m in mutation_sites.find_mutants(code, "x.cpp") if m.operator == "delete_stmt"]
    check(deleted == ["a = 1;", "v.push_back(2);", "++local;", "if (local) v.clear();",
                      "for (int i = 0; i < 2; ++i) v.push_back(i);", "v.push_back(x);",
                      "std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });", "p[m] = 0;"],
          f"statements deleted only in function bodies, never declarations, returns or an if with an else: "
          f"{deleted}")
    m = mutation_sites.find_mutants("int f(int a) {\n  return a < 3;\n}\n", "x.cpp")[0]
    check((m.line, m.column, m.id) == (2, 12, "x.cpp:2:12:lt_to_le"), f"a site's line and column: {m.id}")
    check(m.apply("int f(int a) {\n  return a < 3;\n}\n") == "int f(int a) {\n  return a <= 3;\n}\n", "apply")


# ---- the toy checkout ---------------------------------------------------------------------------

PRESETS = {"version": 6,
           "configurePresets": [{"name": "release", "generator": "Ninja", "binaryDir": "${sourceDir}/build/release",
                                 "cacheVariables": {"CMAKE_BUILD_TYPE": "Release"}},
                                {"name": "asan", "generator": "Ninja", "binaryDir": "${sourceDir}/build/asan",
                                 "cacheVariables": {"CMAKE_BUILD_TYPE": "Debug",
                                                    "CMAKE_CXX_FLAGS": "-fsanitize=address",
                                                    "CMAKE_EXE_LINKER_FLAGS": "-fsanitize=address"}}],
           "testPresets": [{"name": n, "configurePreset": n, "environment": {"TOY_PRESET_ENV": "set"}}
                           for n in ("release", "asan")]}
# clamped_sum and last: what the test checks; largest: what only the campaign checks;
# checked_at: aborts when its bound is off; pause: never ends when its step is 0; pair_sum: a
# size the initializer must fit.
TOY_CPP = """#include "toy.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <thread>

int clamped_sum(const int* v, int n, int limit) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += v[i];
  return std::min(sum, limit);
}

int largest(const int* v, int n) {
  int best = v[0];
  for (int i = 1; i < n; ++i) best = v[i] > best ? v[i] : best;
  return best;
}

int checked_at(const int* v, int n, int i) {
  if (i > n - 1) std::abort();
  return v[i];
}

void pause(int rounds) {
  for (int r = 0; r < rounds; r += 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int last(const int* v, int n) { return v[n - 1]; }

int pair_sum() {
  const std::array<int, 2> pair = {1, 2};
  return pair[0] + pair[1];
}
"""
TOY = {
    "CMakePresets.json": json.dumps(PRESETS, indent=1),
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.25)\nproject(toy CXX)\nenable_testing()\n"
                      "add_subdirectory(optimized/toy)\nadd_subdirectory(check)\n",
    "optimized/toy/CMakeLists.txt": "add_library(toy STATIC toy.cpp)\n"
                                    "add_executable(test_toy test_toy.cpp)\ntarget_link_libraries(test_toy toy)\n"
                                    "add_test(NAME toy_sum COMMAND test_toy)\n",
    "optimized/toy/toy.hpp": "#pragma once\nint clamped_sum(const int* v, int n, int limit);\n"
                             "int largest(const int* v, int n);\nint checked_at(const int* v, int n, int i);\n"
                             "int last(const int* v, int n);\nvoid pause(int rounds);\nint pair_sum();\n",
    "optimized/toy/toy.cpp": TOY_CPP,
    "optimized/toy/test_toy.cpp": """#include <memory>
#include "toy.hpp"
int main() {
  const int v[] = {1, 2, 3, 4, 100};
  const std::unique_ptr<int[]> heap(new int[4]{1, 2, 3, 4});
  return clamped_sum(v, 4, 1000) == 10 && clamped_sum(v, 4, 5) == 5 && checked_at(v, 4, 3) == 4 && (pause(2), true) &&
                 last(heap.get(), 4) == 4 && pair_sum() == 3
             ? 0
             : 1;
}
""",
    "check/CMakeLists.txt": "add_executable(logprobs-check main.cpp)\n"
                            "target_include_directories(logprobs-check PRIVATE ${PROJECT_SOURCE_DIR}/optimized/toy)\n"
                            "target_link_libraries(logprobs-check toy)\n",
    # A stand-in for the campaign: `largest` on a few rows, after TOY_SLEEP seconds (a run to stop).
    "check/main.cpp": """#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include "toy.hpp"
int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "backends") == 0) {
    std::puts("toy       available    the toy backend");
    return 0;
  }
  std::string json;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json = argv[i + 1];
  if (const char* s = std::getenv("TOY_SLEEP")) std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(s)));
  const int rows[3][4] = {{1, 5, 2, 0}, {7, 1, 1, 1}, {0, 0, 0, 9}};
  const char* env = std::getenv("TOY_PRESET_ENV");  // the test preset's environment reaches the campaign
  bool ok = env != nullptr && std::strcmp(env, "set") == 0;
  for (const auto& row : rows) ok = ok && largest(row, 4) == *std::max_element(row, row + 4);
  if (FILE* f = std::fopen(json.c_str(), "w")) {
    std::fprintf(f, "{\\"results\\": [{\\"backend\\": \\"toy\\", \\"k\\": 0, \\"failures\\": %d, "
                    "\\"first_failure\\": \\"largest is wrong\\"}]}", ok ? 0 : 1);
    std::fclose(f);
  }
  if (!ok) std::puts("FAIL toy at K = 0 on hand case 0");
  return ok ? 0 : 1;
}
""",
}
EQUIVALENT = """# FILE:LINE OPERATOR `TEXT` REASON
optimized/toy/toy.cpp:17 gt_to_ge `v[i] > best` a tie keeps the same value
optimized/toy/toy.cpp:99 lt_to_le `i < n` stale: there is no line 99
"""


def make_toy(folder):
    for name, text in TOY.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (folder / "optimized" / "toy" / "mutants-equivalent.txt").write_text(EQUIVALENT)
    return folder


def snapshot(folder):
    """Every path under folder but build/, with its bytes' digest: what "unchanged" means."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] != "build":
            out[str(rel)] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def command(toy, *args):
    return [sys.executable, str(SCRIPT), str(toy / "optimized" / "toy"), "--time", "1", "--jobs", "2", *map(str, args)]


def mutants(toy, *args, env=None):
    return subprocess.run(command(toy, *args), capture_output=True, text=True, env=env, timeout=300, cwd=toy)


def selects(*patterns):
    return [a for p in patterns for a in ("--select", "toy.cpp:" + p)]


def results(report_path):
    report = json.loads(pathlib.Path(report_path).read_text())
    return report, [(r["status"], r.get("reason")) for r in report["mutants"]]


def test_options(toy, work):
    for args, what in ((["--count", "-1", "--list"], "--count -1"), (["--count", "0x10", "--list"], "--count 0x10"),
                       (["--time", "0", "--list"], "--time 0"), (["--time", "nan", "--list"], "--time nan"),
                       (["--operators", "lt_to_le,nope", "--list"], "an unknown operator"),
                       (["--stages", "tests,tests", "--list"], "a stage twice"),
                       (["--all", "--select", "toy.cpp:*:i", "--list"], "--all and --select"),
                       (["--resume", "--list"], "--resume without --json"),
                       (["--preset", "nope", "--list"], "an unknown preset"),
                       (["--min-score", "101", "--list"], "--min-score 101"),
                       (["--no-baseline", "--list"], "--no-baseline without --timeout"),
                       (selects("lt_to_le:no such text") + ["--list"], "a --select that matches nothing"),
                       (selects("delete_stmt:return v[n - 1]") + ["--list"], "a --select of a mutant not offered"),
                       (["--work-dir", toy], "a work dir holding the checkout"),
                       (["--work-dir", toy / "optimized"], "a work dir in the checkout and not ignored"),
                       (["--json", toy / "optimized" / "toy" / "toy.cpp"], "--json onto a source"),
                       (["--json", toy], "--json a folder")):
        run = mutants(toy, *args, *([] if "--list" in args else ["--count", "1"]))
        check(run.returncode == 2, f"{what}: exit {run.returncode}, want 2 ({run.stderr.strip()[-300:]})")
    stray = work / "not-ours"
    stray.mkdir()
    (stray / "file").write_text("x")
    run = mutants(toy, "--count", "1", "--work-dir", stray)
    check(run.returncode == 2 and "not a work dir" in run.stderr, f"a non-empty folder not ours: {run.stderr}")
    listed = mutants(toy, "--list", "--all")
    check(listed.returncode == 0 and "toy.cpp:17:43:gt_to_ge" in listed.stdout and "[equivalent: a tie" in listed.stdout
          and "stale equivalent entry" in listed.stderr and "toy.cpp:99" in listed.stderr,
          f"--list names every mutant, the equivalent ones and the stale entries: {listed.stdout} {listed.stderr}")


def test_run(toy, work):
    before = snapshot(toy)
    report_path = work / "report.json"
    run = mutants(toy, *selects("lt_to_le:i = 0; i < n", "gt_to_ge:v[i] > best", "const_inc:int i = 1",
                                "const_inc:n - 1) std", "sub1_to_add1:i > n - 1", "const_dec:int, 2>"),
                  "--work-dir", work / "w", "--json", report_path)
    check(run.returncode == 0, f"the run: exit {run.returncode}\n{run.stdout}\n{run.stderr}")
    report, got = results(report_path)
    want = [("killed", "test"), ("equivalent", None), ("killed", "campaign"), ("killed", "crash"),
            ("survived", None), ("stillborn", None)]
    check(got == want, f"each kind of result: {got}, want {want}")
    check(all(r["diff"].startswith("--- a/optimized/toy/toy.cpp\n+++ b/optimized/toy/toy.cpp\n@@")
              for r in report["mutants"]), "each mutant's diff is in the report")
    check("error" in report["mutants"][5].get("detail", ""), f"a stillborn's compile error: {report['mutants'][5]}")
    check(report["complete"] and report["summary"]["score"] == 75.0, f"summary: {report['summary']}")
    check("score: 3 / 4 = 75.0%" in run.stdout, f"the score line:\n{run.stdout}")
    check(snapshot(toy) == before, "the checkout is unchanged by a run")

    run = mutants(toy, *selects("const_dec:r += 1"), "--work-dir", work / "w", "--json", work / "t.json",
                  "--timeout", "3")
    check(results(work / "t.json")[1] == [("killed", "timeout")], f"an endless loop times out: {run.stdout}")
    run = mutants(toy, *selects("sub1_to_add1:i > n - 1"), "--work-dir", work / "w", "--json", work / "r.json",
                  "--require-killed")
    check(run.returncode == 1 and "not killed" in run.stderr, f"--require-killed with a survivor: {run.stderr}")
    run = mutants(toy, *selects("lt_to_le:i = 0; i < n"), "--ctest-arg=-E", "--ctest-arg=toy_sum", "--work-dir",
                  work / "w", "--json", work / "e.json")
    check(results(work / "e.json")[1] == [("survived", None)] and "the campaign of toy" in run.stdout
          and "tests in" not in run.stdout, f"--ctest-arg=-E leaves the test out: {run.stdout}")
    run = mutants(toy, *selects("lt_to_le:i = 0; i < n"), "--no-baseline", "--timeout", "60", "--stages", "tests",
                  "--target", "test_toy", "--work-dir", work / "w", "--json", work / "n.json")
    check(results(work / "n.json")[1] == [("killed", "test")] and "its stages not run" in run.stdout
          and "tests in" not in run.stdout, f"--no-baseline and --target: the mutant's stages only: {run.stdout}")
    run = mutants(toy, *selects("lt_to_le:i = 0; i < n"), "--stages", "tests", "--target", "toy", "--work-dir",
                  work / "w", "--json", work / "s.json")
    check(run.returncode == 2 and "run test_toy, which --target does not build" in run.stderr,
          f"--target that leaves the chosen test's program as the last build made it: {run.stderr}")
    run = mutants(toy, *selects("sub1_to_add1:v[n - 1]"), "--preset", "asan", "--work-dir", work / "asan",
                  "--json", work / "asan.json", "--stages", "tests")
    report, got = results(work / "asan.json")
    check(got == [("killed", "sanitizer")] and "heap-buffer-overflow" in report["mutants"][0]["detail"],
          f"a read past the end under --preset asan: {report['mutants']}")
    check(snapshot(toy) == before, "the checkout is unchanged after a timeout and a sanitizer's report")

    # A link at --json is replaced, never written through.
    target = work / "elsewhere.txt"
    target.write_text("keep me")
    link = work / "link.json"
    link.symlink_to(target)
    run = mutants(toy, *selects("const_inc:int i = 1"), "--work-dir", work / "w", "--json", link)
    check(run.returncode == 0 and target.read_text() == "keep me" and not link.is_symlink()
          and json.loads(link.read_text())["complete"], f"--json at a link: {run.stderr}")


def wait_for(path, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def test_signals(toy, work):
    """Stopped while the second mutant's campaign runs (the stand-in sleeps 2 s)."""
    before = snapshot(toy)
    chosen = selects("lt_to_le:i = 0; i < n", "const_inc:int i = 1")
    env = dict(os.environ, TOY_SLEEP="2")
    original = TOY["optimized/toy/toy.cpp"]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        w = work / f"stopped-by-{sig.name}"
        report, scratch = w / "report.json", w / "tree" / "optimized" / "toy" / "toy.cpp"
        proc = subprocess.Popen(command(toy, *chosen, "--work-dir", w, "--json", report), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=toy)
        started = wait_for(w / "logs" / "002-campaign.log")
        time.sleep(0.3)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        code = 128 + sig if sig != signal.SIGKILL else -sig
        check(started and proc.returncode == code, f"{sig.name}: exit {proc.returncode}, want {code}\n{out}\n{err}")
        check(snapshot(toy) == before, f"{sig.name}: the checkout is unchanged")
        data, got = results(report)
        check(not data["complete"] and got == [("killed", "test"), ("pending", None)],
              f"{sig.name}: the report holds what was done: {got}")
        if sig == signal.SIGKILL:
            check(scratch.read_text() != original, "SIGKILL leaves the scratch copy mutated")
        else:
            check(scratch.read_text() == original, f"{sig.name}: the scratch copy is restored")
        again = mutants(toy, *chosen, "--work-dir", w, "--json", report, "--resume")
        data, got = results(report)
        check(again.returncode == 0 and data["complete"] and got == [("killed", "test"), ("killed", "campaign")],
              f"{sig.name}: --resume restores the scratch copy and completes the run: {got} {again.stderr}")
        check(scratch.read_text() == original, f"{sig.name}: the scratch copy is restored after the resumed run")
    check(snapshot(toy) == before, "the checkout is unchanged at the end")


def mutants_commands(text):
    """Each `ci/mutants ...` command of a text, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [m.group(0) for m in re.finditer(r"ci/mutants [^\n`]*", joined)]


def test_docs():
    """The commands docs/ci.md, docs/mutants.md and ci/test give ci/mutants use options it has, and
    ci/test's fixed sample still names mutants of today's code (else CI's asan stage fails late)."""
    options = set(re.findall(r"--[a-z][a-z-]*", subprocess.run([sys.executable, str(SCRIPT), "--help"],
                                                                capture_output=True, text=True).stdout))
    for name in ("docs/ci.md", "docs/mutants.md", "ci/test"):
        commands = mutants_commands((ROOT / name).read_text())
        check(commands, f"{name} runs ci/mutants")
        for command in commands:
            unknown = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", command)) - options
            check(not unknown, f"{name}: ci/mutants has no {sorted(unknown)}: {command}")
    fixed = [c for c in mutants_commands((ROOT / "ci" / "test").read_text()) if "--select" in c]
    selects = [a for c in fixed for a in re.findall(r"--select '([^']+)'", c)]
    listed = subprocess.run([sys.executable, str(SCRIPT), str(ROOT / "optimized" / "cpu"), "--list",
                             *[a for p in selects for a in ("--select", p)]], capture_output=True, text=True)
    check(len(selects) == 3 and listed.returncode == 0 and len(listed.stdout.splitlines()) == 1 + len(selects),
          f"ci/test's fixed sample is three mutants of today's optimized/cpu: {listed.stdout} {listed.stderr}")


def main():
    test_sites()
    test_docs()
    with tempfile.TemporaryDirectory(prefix="test-mutants-") as tmp:
        toy = make_toy(pathlib.Path(tmp) / "toy")
        work = pathlib.Path(tmp) / "out"
        work.mkdir()
        test_options(toy, work)
        test_run(toy, work)
        test_signals(toy, work)
    print(f"{len(failures)} failures" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
