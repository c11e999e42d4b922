"""The package installed as Python users expect: `pip install` of the staged build tree, offline
(no index, no build isolation: Debian's python3-pip, -setuptools and -wheel), into a folder of
its own; from there it imports with its library and pytest finds the plugin through its entry
point, with no -p option."""
import os
import pathlib
import shutil
import subprocess
import sys

import logprobs_harness

STAGED = pathlib.Path(logprobs_harness.__file__).resolve().parent.parent  # build/<preset>/python
EXAMPLE = pathlib.Path(__file__).resolve().with_name("plugin_examples") / "test_planted_kernel.py"


def test_pip_installs_the_package_offline_and_pytest_loads_its_plugin(tmp_path):
    source = tmp_path / "source"  # a copy: pip builds in place, and the build tree stays clean
    shutil.copytree(STAGED, source, ignore=shutil.ignore_patterns("CMakeFiles", "*.cmake", "CTestTestfile.cmake",
                                                                  "tmp", "build", "*.egg-info"))
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-deps",
                           "--disable-pip-version-check", "--target", str(target), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (target / "logprobs_harness" / "liblogprobs_c.so").is_file()

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOGPROBS_HARNESS_LIBRARY")}
    env["PYTHONPATH"] = str(target)
    where = subprocess.run([sys.executable, "-c", "import logprobs_harness as h; print(h.__file__, h.library_path, "
                            "h.__version__, len(h.backends()))"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert where.returncode == 0 and str(target) in where.stdout, where.stdout + where.stderr
    assert where.stdout.split()[1].startswith(str(target)) and where.stdout.split()[2] == logprobs_harness.__version__

    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          f"--basetemp={tmp_path / 'inner'}", f"{EXAMPLE}::test_cpu_backend", "--logprobs-cases", "5",
                          "--logprobs-seed", "2"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0 and "5 passed" in run.stdout, run.stdout + run.stderr
