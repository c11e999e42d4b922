"""The conformance run's reports: the table it prints, JSON and JUnit XML, each file written
atomically (a temporary file in the same folder, then a rename)."""
import dataclasses
import json
import os
import tempfile
import xml.etree.ElementTree as ElementTree

from .conformance import PROPERTIES


def cell(exercised, disagree):
    """'0/389' (disagreeing / exercised cases), or '-' where no case exercised the property."""
    return f"{disagree}/{exercised}" if exercised else "-"


def table(reports):
    """One line per peer: its version, cases, disagreeing cases, and per property the cases that
    disagree on it over those that exercise it; then why each missing peer is missing."""
    head = ["peer", "version", "cases", "disagree"] + list(PROPERTIES)
    rows = [[r.name, r.version or "-", str(r.cases), str(r.disagreements)]
            + [cell(*r.properties[p]) for p in PROPERTIES] for r in reports]
    widths = [max(len(column) for column in columns) for columns in zip(head, *rows)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head] + rows]
    lines += [f"{r.name}: not available: {r.reason.splitlines()[0]}" for r in reports if not r.available]
    return "\n".join(lines)


def _write_atomic(path, text):
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".peers-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def write_json(path, reports, args):
    data = {"tool": "logprobs_harness.peers", "seed": args.seed, "cases_requested": args.cases,
            "peers": [dataclasses.asdict(r) for r in reports]}
    _write_atomic(path, json.dumps(data, indent=1) + "\n")


def write_junit(path, reports):
    """A testsuite per peer, a testcase per property it exercised (failed where a case disagreed,
    with the first finding's message and replay line); an unavailable peer is one skipped case."""
    suites = ElementTree.Element("testsuites", name="logprobs_harness.peers")
    for r in reports:
        suite = ElementTree.SubElement(suites, "testsuite", name=f"peers.{r.name}", time=f"{r.seconds:.3f}")
        cases = failures = skipped = 0
        if not r.available or r.error:
            case = ElementTree.SubElement(suite, "testcase", classname=f"peers.{r.name}", name="available")
            ElementTree.SubElement(case, "error" if r.error else "skipped", message=r.reason.splitlines()[-1]
                                   if r.reason else "").text = r.reason
            cases, failures, skipped = 1, int(r.error), int(not r.error)
        for name in PROPERTIES:
            exercised, disagree = r.properties[name]
            if not exercised:
                continue
            cases += 1
            case = ElementTree.SubElement(suite, "testcase", classname=f"peers.{r.name}", name=name)
            if disagree:
                failures += 1
                finding = next((f for f in r.findings if f.property == name), None)
                failure = ElementTree.SubElement(case, "failure", message=f"{disagree} of {exercised} cases disagree")
                if finding:
                    failure.text = f"{finding.case}, K = {finding.k}: {finding.message}\nreplay: {finding.replay}"
        suite.set("tests", str(cases))
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
    _write_atomic(path, ElementTree.tostring(suites, encoding="unicode") + "\n")
