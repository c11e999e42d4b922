"""The report schemas (docs/schemas/) against what the tool writes and what merge reads.

Every kind of JSON document logprobs-check writes (campaign --json whole and sharded, with a zero
tolerance so that a share of it is infinite, merge --json and a merge of that, verify --json and
compare --json) is validated with python-jsonschema, a second validator beside merge's valijson;
then each report of the malformed-report corpus (fuzz/corpus/fuzz_shard_report/, also the fuzz
target's seeds: issue 24's finding 1, each made from a real run's report with one field changed)
is judged by both: jsonschema's verdict, and merge's exit code and message.

    test_report_schemas.py LOGPROBS_CHECK SOURCE_DIR WORK_DIR     (exit 77 without jsonschema)
"""
import array
import json
import pathlib
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("skipped: python3-jsonschema is not installed (ci/install-deps installs it)")
    sys.exit(77)

TOOL, SOURCE, WORK = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
SCHEMAS = SOURCE / "docs" / "schemas"
CORPUS = SOURCE / "fuzz" / "corpus" / "fuzz_shard_report"

# Each corpus case: the reports merged, then None when each keeps the schema (else the file that
# breaks it), merge's exit code and what its message must say.
CORPUS_CASES = [
    (["shard0of2", "shard1of2"], None, 0, "OK: every backend agrees"),
    (["zero-tolerance"], None, 1, "FAIL: 39 failing"),
    (["tolerance-used-null"], "tolerance-used-null", 2, "max_tolerance_used"),
    *[([f"missing-{f}"], f"missing-{f}", 2, f"field '{f}' is missing")
      for f in ["seed", "k", "contract_version", "build", "version", "backends_under_test", "tolerance", "shard.count"]],
    (["failures-u64max", "shard1of2-one-failure"], "failures-u64max", 2, "field 'results[0].failures'"),
    (["failures-2pow53-1", "shard1of2-one-failure"], None, 2,
     "field 'results[0].failures': the shards' sum 9007199254740991 + 1 exceeds"),
    (["failures-1e20", "shard1of2"], "failures-1e20", 2, "field 'results[0].failures'"),
    (["failures-0.5", "shard1of2"], "failures-0.5", 2, "field 'results[0].failures'"),
    (["failures--1", "shard1of2"], "failures--1", 2, "field 'results[0].failures'"),
    (["shard-count-10000000"], "shard-count-10000000", 2, "field 'shard.count'"),
    (["shard-count-4294967295"], "shard-count-4294967295", 2, "field 'shard.count'"),
    (["shard-count-2pow20"], None, 2, "shards 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... (1048575 in all) of 1048576 missing"),
    (["tolerance-negative"], "tolerance-negative", 2, "field 'tolerance.ulps'"),
    (["six-violations"], "six-violations", 2, "field 'results[0].first_violations'"),
    (["zero-tolerance-diagnosed"], None, 1, "cpu K=5: diagnosis: normalizer_shift: rows 2-4: "),
    (["diagnosis-unknown-name"], "diagnosis-unknown-name", 2, "field 'results[0].diagnoses[0].name'"),
]


def validator(name):
    store = {}
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft7Validator.check_schema(schema)
        store[schema["$id"]] = schema
    main = json.loads((SCHEMAS / name).read_text())
    return jsonschema.Draft7Validator(main, resolver=jsonschema.RefResolver.from_schema(main, store=store))


CAMPAIGN, VERIFY = validator("campaign-report.schema.json"), validator("verify-report.schema.json")
failures = []


def check(holds, what):
    if not holds:
        failures.append(what)
        print("FAIL:", what)


def tool(*args):
    result = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def written(path, schema, command):
    """The document at `path` that `command` wrote, checked against `schema`."""
    document = json.loads(pathlib.Path(path).read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in schema.iter_errors(document)]
    check(not errors, f"{command} wrote {path}, which breaks its schema: {errors[:3]}")
    return document


def writes_what_its_schema_says():
    WORK.mkdir(parents=True, exist_ok=True)
    # A zero tolerance fails cpu with an infinite share of it (the "inf" of max_tolerance_used)
    # and writes counterexamples; max skips K = 5.
    zero = ["--seed", 8, "--cases", 4, "--k", "0,5", "--backends", "max,cpu", "--ulps", 0, "--norm-ulps", 0,
            "--sigma", 0, "--floor", 0, "--out-dir", WORK / "zero"]
    code, output = tool("campaign", *zero, "--json", WORK / "zero.json")
    check(code == 1, f"campaign at a zero tolerance exits 1, not {code}: {output[-400:]}")
    report = written(WORK / "zero.json", CAMPAIGN, "campaign")
    check("inf" in [r["max_tolerance_used"] for r in report["results"]], "an infinite share of a zero tolerance")
    check(report["counterexamples"], "the failing run names its counterexamples")
    for source, target in [("zero.json", "merged-zero.json"), ("merged-zero.json", "remerged-zero.json")]:
        code, output = tool("merge", WORK / source, "--json", WORK / target, "--junit", WORK / (target + ".xml"))
        check(code == 1, f"merge {source} (zero tolerance) exits 1 as the run did, not {code}: {output[-400:]}")
        merged = written(WORK / target, CAMPAIGN, "merge")
        check([r["diagnoses"] for r in merged["results"]] == [r["diagnoses"] for r in report["results"]],
              f"merge {source} keeps each cell's diagnoses")

    quick = ["campaign", "--seed", 3, "--cases", 4, "--k", 0, "--backends", "max"]
    for i in range(2):
        code, output = tool(*quick, "--shard", f"{i}/2", "--json", WORK / f"shard{i}.json", "--out-dir", WORK / "s")
        check(code == 0, f"shard {i}/2 exits 0, not {code}: {output[-400:]}")
        written(WORK / f"shard{i}.json", CAMPAIGN, f"campaign --shard {i}/2")
    code, output = tool("merge", WORK / "shard1.json", WORK / "shard0.json", "--json", WORK / "merged.json")
    check(code == 0, f"merge of two shards exits 0, not {code}: {output[-400:]}")
    check(written(WORK / "merged.json", CAMPAIGN, "merge")["merged_from"], "merge names its inputs")

    batch = next((WORK / "zero").glob("*.safetensors"))
    code, output = tool("compare", "--input", batch, "--k", 0, "--backends", "max,cpu", "--json", WORK / "compare.json")
    check(code in (0, 1), f"compare exits 0 or 1, not {code}: {output[-400:]}")
    check(len(written(WORK / "compare.json", VERIFY, "compare")["results"]) == 2, "compare: one result a backend")
    code, output = tool("run", "--backend", "max", "--input", batch, "--k", 0, "--output", WORK / "result.safetensors")
    check(code == 0, f"run exits 0, not {code}: {output[-400:]}")
    code, output = tool("verify", "--input", batch, "--result", WORK / "result.safetensors", "--k", 0, "--ulps", 0,
                        "--norm-ulps", 0, "--sigma", 0, "--floor", 0, "--json", WORK / "verify.json")
    check(code in (0, 1), f"verify exits 0 or 1, not {code}: {output[-400:]}")
    written(WORK / "verify.json", VERIFY, "verify")
    # A planted bug (every value 0.01 high) is diagnosed: the report's diagnoses keep the schema.
    shift_values(WORK / "result.safetensors", WORK / "shifted.safetensors", 0.01)
    code, output = tool("verify", "--input", batch, "--result", WORK / "shifted.safetensors", "--k", 0,
                        "--json", WORK / "diagnosed.json")
    check(code == 1, f"verify of shifted values exits 1, not {code}: {output[-400:]}")
    diagnosed = written(WORK / "diagnosed.json", VERIFY, "verify")["results"][0]["diagnoses"]
    check(diagnosed and diagnosed[0]["name"].startswith("normalizer_"), f"a normalizer class named: {diagnosed}")


def shift_values(source, target, d):
    """The result file at `source` with d added to every f32 value of lp_logits, written to `target`."""
    data = pathlib.Path(source).read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = bytearray(data[8 + size:])
    begin, end = header["lp_logits"]["data_offsets"]
    values = array.array("f", bytes(body[begin:end]))
    body[begin:end] = array.array("f", [v + d for v in values]).tobytes()
    pathlib.Path(target).write_bytes(data[:8 + size] + bytes(body))


def corpus_is_judged_alike():
    named = {path.stem for path in CORPUS.glob("*.json")}
    used = {name for names, *_ in CORPUS_CASES for name in names}
    check(named == used, f"every corpus file has a case: {sorted(named ^ used)}")
    for names, breaking, want_code, fragment in CORPUS_CASES:
        for name in names:
            valid = CAMPAIGN.is_valid(json.loads((CORPUS / f"{name}.json").read_text()))
            check(valid == (name != breaking), f"jsonschema finds {name} {'valid' if valid else 'invalid'}")
        files = [CORPUS / f"{name}.json" for name in names]
        code, output = tool("merge", *files, "--memory-budget", "100M", "--junit", WORK / "corpus.xml")
        check(code == want_code and fragment in output and len(output) < 20000,
              f"merge {' '.join(names)}: exit {code} (want {want_code}), message holding {fragment!r}: {output[-600:]}")


writes_what_its_schema_says()
corpus_is_judged_alike()
print(f"test_report_schemas: {len(failures)} failures")
sys.exit(1 if failures else 0)
