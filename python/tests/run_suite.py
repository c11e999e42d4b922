#!/usr/bin/env python3
"""Runs one Python suite for ctest, or says why it cannot (exit 77, ctest's skip):

    run_suite.py [--needs MODULE...] -- PYTEST_ARGS...   pytest with these arguments
    run_suite.py [--needs MODULE...] --script FILE ARGS  a plain script
    run_suite.py --in-env DIR ...                        either, under DIR's interpreter (a peer's
                                                         virtual environment, ci/install-deps --peers)
"""
import importlib.util
import os
import runpy
import sys


def main(argv):
    if argv[:1] == ["--in-env"]:
        python = os.path.join(argv[1], "bin", "python")
        if not os.path.exists(python):
            print(f"run_suite: SKIP: no environment {argv[1]} (ci/install-deps --peers makes it)")
            return 77
        os.execv(python, [python, os.path.abspath(__file__)] + argv[2:])
    needs, rest = [], argv
    if rest[:1] == ["--needs"]:
        rest = rest[1:]
        while rest and rest[0] not in ("--", "--script"):
            needs.append(rest.pop(0))
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        print(f"run_suite: SKIP: {sys.executable} has no {', '.join(missing)}")
        return 77
    if rest[:1] == ["--script"]:
        sys.argv = rest[1:]
        runpy.run_path(rest[1], run_name="__main__")
        return 0
    import pytest

    return pytest.main(rest[1:] if rest[:1] == ["--"] else rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
