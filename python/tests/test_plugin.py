"""The pytest plugin, through pytest runs of its own on plugin_examples/: a kernel that keeps the
contract passes every random case; a planted fault is reported shrunk (the sizes before and
after) with the logprobs-check command and the pytest option that replay it, and both replay
the failure; a test that crashes is shrunk too; the options and the marker do what they say."""
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().with_name("plugin_examples")
PLANTED = EXAMPLES / "test_planted_kernel.py"


def pytest_run(tmp_path, *args):
    """pytest on the examples with the plugin, in a fresh folder; (exit status, output)."""
    command = [sys.executable, "-m", "pytest", "-p", "logprobs_harness.pytest_plugin", "-p", "no:cacheprovider",
               f"--basetemp={tmp_path / 'inner'}", "--rootdir", str(EXAMPLES), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    return done.returncode, done.stdout + done.stderr


def test_a_kernel_that_keeps_the_contract_passes_every_case(tmp_path):
    code, output = pytest_run(tmp_path, f"{PLANTED}::test_cpu_backend", "--logprobs-seed", 5,
                              "--logprobs-cases", 30)
    assert code == 0 and "30 passed" in output, output
    assert "logprobs_harness: seed 5 (--logprobs-seed 5 draws these cases again), 30 cases per test" in output


def test_a_planted_fault_is_reported_shrunk_with_the_commands_that_replay_it(tmp_path):
    code, output = pytest_run(tmp_path, f"{PLANTED}::test_planted_kernel", "--logprobs-seed", 1,
                              "--logprobs-cases", 10, "-x")
    assert code == 1, output
    before = re.search(r"before: B = (\d+), V = (\d+), (\d+) logit rows?, (\d+) output rows?", output)
    after = re.search(r"after:  B = (\d+), V = (\d+), (\d+) logit rows?, (\d+) output rows?", output)
    assert before and after, output
    print(f"\nplanted fault (V > 64: first top value + 1e-3), seed 1: {before.group(0)} -> {after.group(0)}")
    b_before, v_before = int(before.group(1)), int(before.group(2))
    assert v_before > 64 and b_before * v_before > 65
    assert after.group(2) == "65" and int(after.group(1)) * int(after.group(2)) < b_before * v_before
    assert re.search(r"shrunk in \d+ steps \(\d+ runs of the test\)", output)
    assert "value: batch 0, output row 0, slot 0: token" in output and "value off by 0.001" in output

    replay = re.search(r"replay: (.*)", output).group(1)
    print(f"replay: {replay}")
    assert replay.startswith(os.environ.get("LOGPROBS_CHECK", "logprobs-check") + " verify --input ")
    if os.environ.get("LOGPROBS_CHECK"):
        done = subprocess.run(shlex.split(replay), capture_output=True, text=True)
        assert done.returncode == 1 and "slot 0: token" in done.stdout, done.stdout + done.stderr
        print(done.stdout.splitlines()[0])

    # The printed line runs as pasted, from another folder: the test on the shrunk case, `[replay]`.
    shown = re.search(r"the test on the shrunk case: (.*)", output).group(1)
    assert shown.startswith("cd ") and "-p logprobs_harness.pytest_plugin" in shown and "[case" not in shown, shown
    options = f"-p no:cacheprovider --basetemp={tmp_path / 'again'}"
    done = subprocess.run(shown, shell=True, capture_output=True, text=True, cwd="/",
                          env=dict(os.environ, PYTEST_ADDOPTS=options))
    again = done.stdout + done.stderr
    assert done.returncode == 1 and "test_planted_kernel[replay]" in again and "V = 65" in again, again


def test_the_diagnosis_is_the_first_line_after_the_headline(tmp_path):
    code, output = pytest_run(tmp_path, f"{PLANTED}::test_bf16_kernel", "--logprobs-seed", 1,
                              "--logprobs-cases", 10, "-x")
    assert code == 1, output
    headline = re.search(r"test_bf16_kernel\[case\d+\] failed on case \d+ .*; shrunk in \d+ steps \(\d+ runs of the test\)\n"
                         r"E?\s*diagnosis: values_rounded_bf16: rows? \d", output)
    assert headline, output
    print(f"\n{headline.group(0)}")


def test_a_crashing_test_is_shrunk_too(tmp_path):
    code, output = pytest_run(tmp_path, f"{PLANTED}::test_crashing_kernel", "--logprobs-seed", 1,
                              "--logprobs-cases", 10, "-x")
    assert code == 1 and "ShrunkFailure" in output, output
    assert re.search(r"after:  B = 1, V = 31, 1 logit row, 1 output row", output), output
    assert "IndexError: the kernel's table holds 30 entries, not 31" in output


def test_the_same_seed_draws_the_same_cases(tmp_path):
    runs = [pytest_run(tmp_path, f"{PLANTED}::test_planted_kernel", "--logprobs-seed", 9, "--logprobs-cases", 6,
                       "--logprobs-max-shrinks", 1, "-q", "-rf")[1] for _ in range(2)]
    failed = [re.findall(r"FAILED \S+", run) for run in runs]
    assert failed[0] == failed[1], runs


def test_an_unknown_marker_setting_is_a_usage_error(tmp_path):
    test = tmp_path / "test_marker.py"
    test.write_text("import pytest\n\n@pytest.mark.logprobs(vocabulary=5)\ndef test_x(logprobs_case):\n    pass\n")
    code, output = pytest_run(tmp_path, test)
    assert code != 0 and "unknown settings vocabulary" in output, output


def test_a_case_count_below_one_is_a_usage_error(tmp_path):
    # The case: --logprobs-cases 0 (a CI variable set to 0) or -3, or a marker cases=-1,
    # reported "1 skipped" and exit 0 for a failing kernel: the gate turned off silently.
    test = tmp_path / "test_failing.py"
    test.write_text("def test_x(logprobs_case):\n    assert False\n")
    for count in ("0", "-3", "two"):
        code, output = pytest_run(tmp_path, test, "--logprobs-cases", count)
        assert code == 4 and "--logprobs-cases: must be a whole number >= 1" in output, output
    code, output = pytest_run(tmp_path, test, "--logprobs-max-shrinks", "0")
    assert code == 4 and "--logprobs-max-shrinks: must be a whole number >= 1" in output, output
    for setting, message in (("cases=-1", "cases must be a whole number >= 1, got -1"),
                             ("cases=0", "cases must be a whole number >= 1, got 0"),
                             ("k=2**32 + 5", "k must be a whole number in 0..65535, got 4294967301")):
        marked = tmp_path / "test_marked.py"
        marked.write_text(f"import pytest\n\n@pytest.mark.logprobs({setting})\n"
                          "def test_x(logprobs_case):\n    assert False\n")
        code, output = pytest_run(tmp_path, marked)
        assert code != 0 and "passed" not in output and "skipped" not in output and message in output, output


def test_shrunk_cases_of_tests_with_one_name_in_two_files_are_both_kept(tmp_path):
    # The case: a/test_k.py::test_kernel[case0] and b/test_k.py::test_kernel[case0] wrote
    # one file, and one printed replay line ran the other's batch.
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "test_k.py").write_text(
            "def test_kernel(logprobs_case):\n"
            f"    assert logprobs_case.batch.vocab < 3, '{folder} fails'\n")
    replay = tmp_path / "replay"
    code, output = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "logprobs_harness.pytest_plugin", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'inner'}", "--rootdir", str(tmp_path), "a", "b", "--logprobs-cases", "1",
         "--logprobs-seed", "3", "--logprobs-max-shrinks", "20", "--logprobs-replay-dir", str(replay)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600).returncode, None
    files = sorted(p.name for p in replay.iterdir())
    assert code == 1 and len(files) == 2, files
    for folder in ("a", "b"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "logprobs_harness.pytest_plugin", "-p", "no:cacheprovider",
             f"--basetemp={tmp_path / 'again'}", "--rootdir", str(tmp_path), f"{folder}/test_k.py::test_kernel",
             "--logprobs-replay", str(replay / next(f for f in files if f.startswith(f"{folder}-test_k")))],
            capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert done.returncode == 1 and f"{folder} fails" in done.stdout, done.stdout + done.stderr


def test_the_readme_example_passes(tmp_path):
    pytest.importorskip("torch")
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = re.search(r"```python\n(import pytest, torch\n.*?)```", readme, re.S)
    assert example, "README.md has no example starting with 'import pytest, torch'"
    (tmp_path / "test_readme.py").write_text(example.group(1))
    code, output = pytest_run(tmp_path, tmp_path / "test_readme.py", "--logprobs-seed", 4, "--logprobs-cases", 40)
    assert code == 0 and "40 passed" in output, output


def test_the_torch_kernel_of_the_examples(tmp_path):
    pytest.importorskip("torch")
    torch_examples = EXAMPLES / "test_torch_kernel.py"
    code, output = pytest_run(tmp_path, f"{torch_examples}::test_torch_kernel", "--logprobs-seed", 3,
                              "--logprobs-cases", 40)
    assert code == 0 and "40 passed" in output, output
    code, output = pytest_run(tmp_path, f"{torch_examples}::test_torch_kernel_in_bf16", "--logprobs-seed", 3,
                              "--logprobs-cases", 10, "-x")
    assert code == 1 and "value: batch" in output and re.search(r"after:  B = \d+, V = \d+", output), output
    print("\n" + "\n".join(line for line in output.splitlines() if "before:" in line or "after:" in line))


def test_the_invariance_fixture_passes_an_invariant_kernel_and_fails_a_planted_one(tmp_path):
    example = EXAMPLES / "test_invariance_example.py"
    code, output = pytest_run(tmp_path, f"{example}::test_the_cpu_backend_is_invariant", "--logprobs-seed", 5,
                              "--logprobs-cases", 6)
    assert code == 0, output
    code, output = pytest_run(tmp_path, f"{example}::test_a_kernel_that_depends_on_the_row_position",
                              "--logprobs-seed", 5, "--logprobs-cases", 6)
    assert code == 1 and "InvarianceFailure" in output and "batch: case seed" in output, output
    shown = re.search(r"show again: (.*)", output).group(1)
    done = subprocess.run(shlex.split(shown), capture_output=True, text=True)
    assert done.returncode == 1 and "ulps apart" in done.stdout, done.stdout + done.stderr

