"""The Python package end to end through the C API: batches from every kind of buffer, the
backends and the reference, judging either layout (each planted fault under its rule, the
tolerance options, ranks), assert_agrees and its replay command, random cases and shrinking,
files, errors, threads, and the ctypes declarations against the C compiler's layout."""
import array
import os
import subprocess
import sys
import threading

import pytest

import logprobs_harness as lh

CHECK = os.environ.get("LOGPROBS_CHECK")
LOGITS = [1, 3, 2, 3, -1, 0, 0, 0, 0, 5]  # two rows of V = 5: x_s = 2 has rank 3, x_s = 5 rank 1


def small_batch(**kwargs):
    return lh.Batch(array.array("f", LOGITS), array.array("I", [2, 4]), vocab=5, **kwargs)


def split_of(result):
    """The split layout of a packed result, as lists."""
    k = result.top_k
    rows = result.lp_tokens.tolist(), result.lp_logits.tolist()
    return ([r[:k] for r in rows[0]], [r[:k] for r in rows[1]], [r[k] for r in rows[1]])


def test_version_and_library():
    # 2: contract v3's sum rules in logprobs_tolerance, violations and stats; 3: diagnoses; 4: violations
    # kept (logprobs_judge_keeping) apart from those counted (logprobs_verdict_violations_found, _rule_count)
    assert lh.API_VERSION == 4
    assert lh.library_path.name == "liblogprobs_c.so"
    assert lh.__version__ != "0+unknown"


def test_backends_declare_their_parts():
    found = {b.name: b for b in lh.backends()}
    assert lh.backends()[0].name == "reference"
    assert found["reference"].available and found["reference"].any_k and found["reference"].ranks
    assert found["max"].sums_in_one_chain and not found["max"].any_k and not found["max"].bf16_logits
    assert found["cpu"].claims_canonical_arithmetic and not found["reference"].claims_canonical_arithmetic


@pytest.mark.parametrize("make", [
    lambda: array.array("f", LOGITS),
    lambda: memoryview(array.array("f", LOGITS)),
    lambda: bytes(array.array("f", LOGITS)),  # read-only: copied
], ids=["array", "memoryview", "bytes"])
def test_batch_from_buffers(make):
    logits = make()
    if isinstance(logits, bytes):
        logits = memoryview(logits).cast("f")
    batch = lh.Batch(logits, [2, 4], vocab=5)
    assert (batch.rows, batch.vocab, batch.dtype, batch.output_rows) == (2, 5, "f32", 2)
    assert batch.logits.tolist() == [LOGITS[:5], LOGITS[5:]]
    plan = batch.plan()
    assert (plan.logit_rows, plan.tokens, plan.batch_items) == ([0, 1], [2, 4], [0, 1])


def test_batch_from_numpy_of_any_int_width_and_float16():
    np = pytest.importorskip("numpy")
    logits = np.array(LOGITS, dtype=np.float16).reshape(2, 5)
    batch = lh.Batch(logits, np.array([2, 4], dtype=np.int64))
    assert batch.dtype == "f16" and batch.vocab == 5
    bits = np.array(LOGITS, dtype=np.float32).view(np.uint32) >> 16  # bf16: the top half of each f32
    bf16 = lh.Batch(bits.astype(np.uint16).reshape(2, 5), [2, 4], dtype="bf16")
    assert bf16.dtype == "bf16" and lh.judge(bf16, 3, lh.reference(bf16, 3)).ok
    with pytest.raises(ValueError, match="0..2\\^32 - 1"):
        lh.Batch(logits, np.array([-1, 4]))
    with pytest.raises(TypeError, match="float64"):
        lh.Batch(np.zeros((2, 5)), [0, 0])


def test_batch_from_torch_tensors_of_each_dtype():
    torch = pytest.importorskip("torch")
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.float16, "f16")):
        logits = torch.tensor(LOGITS).view(2, 5).to(dtype)
        batch = lh.Batch(logits, torch.tensor([2, 4]), temperatures=torch.tensor([1.0, 0.5]))
        assert batch.dtype == name and batch.temperatures.tolist() == [1.0, 0.5]
        assert torch.equal(batch.torch_logits(), logits)
        assert lh.judge(batch, 3, lh.reference(batch, 3)).ok
    wide = torch.arange(30, dtype=torch.float32).view(3, 10)[:, :5]  # rows of a wider tensor
    assert lh.Batch(wide, [0, 1, 2]).logits.tolist()[2] == [20, 21, 22, 23, 24]


def test_ragged_offsets_and_their_validation():
    batch = lh.Batch(array.array("f", LOGITS), [4], vocab=5, tokens=[3], logit_row_offsets=[0, 2],
                     token_row_offsets=[0, 1], lp_output_offsets=[0, 2])
    assert batch.plan().tokens == [3, 4]
    with pytest.raises(TypeError, match="together"):
        lh.Batch(array.array("f", LOGITS), [4], vocab=5, logit_row_offsets=[0, 2])
    with pytest.raises(lh.InvalidBatch, match="sampled_tokens\\[1\\] = 5 is not below vocab 5"):
        lh.Batch(array.array("f", LOGITS), [2, 5], vocab=5).validate()


def test_reference_and_the_backends_agree():
    batch = small_batch()
    ref = lh.reference(batch, 3, ranks=True)
    assert ref.backend == "reference" and ref.ranks.tolist() == [3, 1]
    assert ref.lp_tokens.tolist()[0][3] == 2
    for backend in ("max", "cpu"):
        result = lh.run(backend, batch, 3)
        report = lh.judge(batch, 3, result)
        assert report.ok and report.rows == 2 and report.values == 8, report
        assert report.tolerance.sum_rule == "calibrated"  # the caller's rule, whatever produced the result
        assert lh.judge(batch, 3, result, sum_rule="linear").tolerance.sum_rule == "linear"  # how compare judges max
    with pytest.raises(lh.UnsupportedPart, match="K = 5"):
        lh.run("max", batch, 5)
    with pytest.raises(lh.UnknownBackend, match="known: reference"):
        lh.run("nope", batch, 3)


def test_judging_either_layout_and_each_planted_fault_under_its_rule(tmp_path):
    batch = small_batch()
    ref = lh.reference(batch, 3, ranks=True)
    tokens, values, sampled = split_of(ref)
    ranks = ref.ranks.tolist()
    assert lh.judge(batch, 3, top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled, ranks=ranks).ok

    def rules(**changes):
        arrays = dict(top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled, ranks=ranks)
        arrays.update(changes)
        report = lh.judge(batch, 3, **arrays)
        assert not report.ok and report.violation_count == len(report.violations)
        return set(report.rules)

    assert rules(top_logprobs=[[v + 0.01 if (r, s) == (0, 0) else v for s, v in enumerate(row)]
                               for r, row in enumerate(values)]) == {"value"}
    assert rules(ranks=[2, 1]) == {"rank"}
    # The diagnosis names the class: ranks counted with > (row 0's x_s = 2 ties one other 2).
    strict = lh.judge(batch, 3, top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled, ranks=[2, 1])
    assert [(d.name, d.rows) for d in strict.diagnoses] == [("rank_strict", [0])], strict.diagnoses
    assert "instead of >=" in strict.diagnoses[0].evidence and isinstance(strict.diagnoses[0], lh.Diagnosis)
    assert lh.judge(batch, 3, top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled).diagnoses == []
    with pytest.raises(lh.Disagreement) as raised:
        lh.assert_agrees(batch, 3, top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled, ranks=[2, 1],
                         replay_dir=str(tmp_path))
    assert raised.value.diagnoses == strict.diagnoses
    assert str(raised.value).split("\n")[1].startswith("  diagnosis: rank_strict: row 0: "), str(raised.value)
    # Row 0's best token (x = 3) swapped for token 0 (x = 1), with token 0's own log-probability.
    assert tokens[0][0] in (1, 3)
    swapped = [[0] + tokens[0][1:], tokens[1]]
    assert rules(top_tokens=swapped, top_logprobs=[[values[0][0] - 2] + values[0][1:], values[1]]) == {"not_top"}
    assert rules(top_tokens=[row[:1] * 3 for row in tokens]) >= {"duplicate_token"}
    assert rules(top_tokens=[[9] + row[1:] for row in tokens]) >= {"token_range"}
    assert rules(top_tokens=[[5] + row[1:] for row in tokens]) >= {"padding_count"}
    assert rules(sampled_logprobs=[sampled[0] - 0.25, sampled[1]]) == {"greedy_exact", "value"}
    packed = lh.judge(batch, 3, lp_logits=ref.lp_logits.tolist(), lp_tokens=[[1, 3, 2, 0], [4, 0, 1, 4]])
    assert set(packed.rules) == {"last_token"}
    with pytest.raises(lh.InvalidArgument, match=r"lp_logits is \[2, 4\]: K = 3, k=5 given"):
        lh.judge(batch, 5, lp_logits=ref.lp_logits.tolist(), lp_tokens=ref.lp_tokens.tolist())
    with pytest.raises(lh.InvalidArgument, match=r"top_tokens is \[2, 3\]: K = 3, k=1 given"):
        lh.judge(batch, 1, top_tokens=tokens, top_logprobs=values, sampled_logprobs=sampled)
    short = lh.judge(batch, 3, lp_logits=ref.lp_logits.tolist()[:1], lp_tokens=ref.lp_tokens.tolist()[:1])
    assert set(short.rules) == {"shape"} and "got [1, 4]" in short.violations[0].message
    first = packed.violations[0]
    assert (first.rule, first.batch, first.row, first.slot, first.token) == ("last_token", 0, 0, 3, 0)


# Issue 24's finding 6: 64 rows over V = 1 at K = 65535, every token out of range (4194368
# violations). judge(..., limit=5) kept them all in the C verdict (the process grew by 1.6 GB) and
# counted its rules over the five it read.
KEEPING = """
import array, resource, sys
import logprobs_harness as lh
rows, k = 64, 65535
batch = lh.Batch(array.array("f", [0.0] * rows), [0], vocab=1, tokens=[0] * (rows - 1), logit_row_offsets=[0, rows],
                 token_row_offsets=[0, rows - 1], lp_output_offsets=[0, rows])
got = lh.Result.packed(array.array("f", [0.0]) * (rows * (k + 1)), array.array("I", [2]) * (rows * (k + 1)), k=k)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = lh.judge(batch, k, got, limit=int(sys.argv[1]))
grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(repr((report.ok, len(report.violations), report.violation_count, sorted(report.rules.items()), grown_mb)))
"""


def test_judge_keeps_its_limit_and_counts_every_violation():
    for limit in (5, 0):
        out = subprocess.run([sys.executable, "-c", KEEPING, str(limit)], capture_output=True, text=True, check=True)
        ok, kept, counted, rules, grown_mb = eval(out.stdout)
        assert (ok, kept, counted) == (False, limit, 4194368), out.stdout
        assert rules == [("last_token", 64), ("padding_count", 64), ("token_range", 4194240)], out.stdout
        assert grown_mb < 200, f"judging grew the process by {grown_mb:.0f} MB keeping {limit} violations"
    with pytest.raises(lh.InvalidArgument, match="limit"):
        lh.judge(small_batch(), 3, lp_logits=[0.0] * 8, lp_tokens=[0] * 8, limit=-1)


def test_tolerance_options():
    batch = small_batch()
    ref = lh.reference(batch, 3)
    off = [[v - 1e-5 for v in row] for row in ref.lp_logits.tolist()]
    tight = lh.judge(batch, 3, lp_logits=off, lp_tokens=ref.lp_tokens.tolist())
    assert not tight.ok and tight.tolerance == lh.DEFAULT_TOLERANCE
    loose = lh.judge(batch, 3, lp_logits=off, lp_tokens=ref.lp_tokens.tolist(), ulps=1000, norm_ulps=1000)
    assert loose.ok and 0 < loose.tolerance_used <= 1 and loose.max_abs_error == pytest.approx(1e-5, rel=0.1)
    assert loose.tolerance == lh.Tolerance(1000.0, 1000.0, "calibrated", 2.0, 8.0)
    assert lh.DEFAULT_TOLERANCE == lh.Tolerance(4.0, 4.0, "calibrated", 2.0, 8.0)
    assert lh.judge(batch, 3, lp_logits=off, lp_tokens=ref.lp_tokens.tolist(), floor=1e4).ok
    assert lh.judge(batch, 3, lp_logits=off, lp_tokens=ref.lp_tokens.tolist(), sum_rule="sqrt", sigma=1e4).ok
    linear = lh.judge(batch, 3, ref, linear_sum=True)
    assert linear.tolerance.sum_rule == "linear" and linear.tolerance_row.sum_rule == "linear"
    assert tight.violations[0].sum_rule == "calibrated" and tight.violations[0].sum_err >= 8 * 2**-24
    assert tight.violations[0].sum_err == max(2 * tight.violations[0].dev, 8 * 2**-24)
    assert tight.tolerance_row.kind in ("confident", "masked", "flat", "spread") and tight.tolerance_row.vocab == 5
    with pytest.raises(lh.InvalidArgument, match="sigma must be a finite number"):
        lh.judge(batch, 3, ref, sigma=float("nan"))
    with pytest.raises(lh.InvalidArgument, match="floor must be a finite number"):
        lh.judge(batch, 3, ref, floor=-1)
    with pytest.raises(ValueError, match="sum_rule must be one of calibrated, linear, sqrt"):
        lh.judge(batch, 3, ref, sum_rule="pairwise")
    with pytest.raises(ValueError, match="contradicts"):
        lh.judge(batch, 3, ref, sum_rule="sqrt", linear_sum=True)


def test_the_rule_comes_from_the_caller_never_from_the_result_file(tmp_path):
    """A result file whose metadata says it came from `max` (one f32 chain) is judged by the rule
    the caller gives, as `logprobs-check verify` judges it: the file may be reported, never obeyed."""
    batch = lh.random_batch(7, 60, lh.Options(dtype="f32", vocab=152064, temperatures=False, finite=True))
    ref = lh.reference(batch, 3)
    off = [[v - 2e-3 for v in row] for row in ref.lp_logits.tolist()]
    path = tmp_path / "result.safetensors"
    lh.save_result(path, lh.Result.packed(off, ref.lp_tokens.tolist()), metadata={"k": "3", "backend": "max"})
    loaded = lh.load_result(path)
    assert loaded.backend == "max"
    report = lh.judge(batch, 3, loaded)
    assert not report.ok and report.tolerance.sum_rule == "calibrated"


def test_assert_agrees_writes_files_that_logprobs_check_replays(tmp_path):
    batch = small_batch()
    ref = lh.reference(batch, 3)
    assert lh.assert_agrees(batch, 3, ref).ok
    values = [[v + 0.5 if s == 1 else v for s, v in enumerate(row)] for row in ref.lp_logits.tolist()]
    with pytest.raises(AssertionError) as raised:
        lh.assert_agrees(batch, 3, lp_logits=values, lp_tokens=ref.lp_tokens.tolist(), replay_dir=tmp_path,
                         sigma=3)
    failure = raised.value
    assert isinstance(failure, lh.Disagreement) and "value: batch 0, output row 0, slot 1" in str(failure)
    assert os.path.exists(failure.batch_path) and os.path.exists(failure.result_path)
    assert failure.commands[0].endswith("--k 3 --sigma 3.0") and f"replay: {failure.commands[0]}" in str(failure)
    if CHECK:
        done = subprocess.run(failure.commands[0], shell=True, capture_output=True, text=True)
        assert done.returncode == 1 and "slot 1: token" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("where", ["a file", "under /proc", "the environment names a file"])
def test_a_replay_folder_that_cannot_be_written_keeps_the_verdict(tmp_path, monkeypatch, where):
    batch = small_batch()
    ref = lh.reference(batch, 3)
    values = [[v + 0.5 if s == 1 else v for s, v in enumerate(row)] for row in ref.lp_logits.tolist()]
    (tmp_path / "a_file").write_text("not a folder")
    replay_dir = {"a file": str(tmp_path / "a_file"), "under /proc": "/proc/logprobs-replay"}.get(where)
    if replay_dir is None:
        monkeypatch.setenv("LOGPROBS_HARNESS_REPLAY_DIR", str(tmp_path / "a_file"))
    with pytest.raises(lh.Disagreement) as raised:
        lh.assert_agrees(batch, 3, lp_logits=values, lp_tokens=ref.lp_tokens.tolist(), replay_dir=replay_dir)
    message = str(raised.value)
    assert "value: batch 0, output row 0, slot 1" in message and "replay files not written: " in message, message
    assert raised.value.report.violation_count > 0 and raised.value.batch_path is None


def test_k_is_checked_where_it_enters_the_package(tmp_path):
    # The cases: ctypes truncated K modulo 2^32, so judge(batch, 2**32 + 5, ...) judged
    # at K = 5 and reference(batch, 2**32) returned a K = 0 result.
    batch = small_batch()
    ref = lh.reference(batch, 3)
    for k in (2**32 + 5, 2**32, 65536, -1, 3.0, True, "3"):
        for call in (lambda: lh.judge(batch, k, ref), lambda: lh.reference(batch, k), lambda: lh.run("cpu", batch, k),
                     lambda: batch.output_shape(k), lambda: lh.save_batch(tmp_path / "k.safetensors", batch, k=k),
                     lambda: lh.random_batches(1, 2, k=k), lambda: lh.random_batches(1, 2, k=[5, k])):
            with pytest.raises(lh.InvalidArgument, match=r"k must be a whole number in 0\.\.65535, got "):
                call()
    assert not (tmp_path / "k.safetensors").exists()
    for count in (0, -3, 2.5):
        with pytest.raises(lh.InvalidArgument, match="count must be a whole number >= 1"):
            lh.random_batches(1, count)


def test_metadata_the_reader_refuses_is_not_written(tmp_path):
    # The case: save_batch(..., metadata={"k": "007"}) wrote a file load_batch refused.
    batch = small_batch()
    for metadata, message in (({"k": "007"}, "metadata k = '007' is not a plain decimal integer"),
                              ({"levels": "17"}, "metadata levels = '17'"), ({"k": "3"}, None)):
        path = tmp_path / "meta.safetensors"
        if message is None:
            lh.save_batch(path, batch, metadata=metadata)
            assert lh.load_batch(path).k == 3
            continue
        with pytest.raises(lh.FileError, match=message):
            lh.save_batch(path, batch, metadata=metadata)
        assert not path.exists()


def test_replay_files_of_failures_that_differ_in_any_input_are_distinct(tmp_path):
    # The case: the digest left out offsets, temperatures and ranks, so two failures
    # differing only in temperature (or only in ranks) shared their files.
    ref = lh.reference(small_batch(), 3)
    values = [[v + 0.5 for v in row] for row in ref.lp_logits.tolist()]

    def failure(batch, ranks=None):
        with pytest.raises(lh.Disagreement) as raised:
            lh.assert_agrees(batch, 3, lp_logits=values, lp_tokens=ref.lp_tokens.tolist(), lp_ranks=ranks,
                             replay_dir=tmp_path)
        return raised.value

    failures = [failure(small_batch(temperatures=[1.0, 0.5])), failure(small_batch(temperatures=[1.0, 0.25])),
                failure(small_batch(), ranks=[3, 1]), failure(small_batch(), ranks=[3, 2])]
    assert len({f.batch_path for f in failures}) == 4 and len({f.result_path for f in failures}) == 4
    assert [lh.load_batch(f.batch_path).temperatures.tolist() for f in failures[:2]] == [[1.0, 0.5], [1.0, 0.25]]
    assert [lh.load_result(f.result_path).ranks.tolist() for f in failures[2:]] == [[3, 1], [3, 2]]


def test_a_backend_result_replays_with_compare(tmp_path):
    batch = small_batch()
    result = lh.run("cpu", batch, 3, ranks=True)
    result._arrays["lp_logits"].data[0:4] = array.array("f", [0.0]).tobytes()  # plant a wrong value
    with pytest.raises(lh.Disagreement) as raised:
        lh.assert_agrees(batch, 3, result, replay_dir=tmp_path)
    assert raised.value.commands[1].endswith("--k 3 --ranks --backends cpu")


def test_random_cases_are_reproducible_and_honour_their_options():
    a, b = lh.random_batches(7, 4, k=[5, 20]), lh.random_batches(7, 4, k=[5, 20])
    assert [c.k for c in a] == [5, 20, 5, 20] and [c.seed for c in a] == [c.seed for c in b]
    assert all(x.batch.logits.tobytes() == y.batch.logits.tobytes() for x, y in zip(a, b))  # NaN included
    assert a[0].seed == lh.case_seed(7, 0) and [c.size for c in a] == [0, 33, 66, 100]
    for case in lh.random_batches(3, 5, k="random", dtype="bf16", vocab=300, temperatures=True, finite=True):
        assert case.batch.dtype == "bf16" and case.batch.vocab == 300 and case.batch.temperatures is not None
        assert 0 <= case.k <= 65535
        assert lh.judge(case.batch, case.k, lh.reference(case.batch, case.k)).ok
    with pytest.raises(lh.InvalidArgument, match="vocab"):
        lh.random_batch(1, 50, lh.Options(vocab=2**25))


def test_shrinking_through_a_python_predicate():
    def fails(batch):
        return batch.vocab > 100 and batch.output_rows > 0

    for seed in range(1, 200):
        smallest, steps, calls = lh.find_counterexample(seed, 100, fails)
        if smallest is not None:
            break
    assert smallest is not None and steps > 0 and calls > steps
    assert (smallest.vocab, smallest.batch_size, smallest.output_rows) == (101, 1, 1)
    assert lh.find_counterexample(3, 50, lambda b: False) == (None, 0, 1)

    def broken(batch):
        raise KeyError("from the predicate")

    with pytest.raises(KeyError, match="from the predicate"):
        lh.find_counterexample(3, 50, broken)


def test_files_round_trip_in_both_layouts(tmp_path):
    batch = small_batch(temperatures=[1.0, 0.5])
    lh.save_batch(tmp_path / "b.safetensors", batch, k=3, metadata={"origin": "test"})
    loaded = lh.load_batch(tmp_path / "b.safetensors")
    assert loaded.k == 3 and loaded.metadata["origin"] == "test" and loaded.temperatures.tolist() == [1.0, 0.5]
    ref = lh.reference(loaded, 3, ranks=True)
    tokens, values, sampled = split_of(ref)
    split = lh.Result.split(tokens, values, sampled, ref.ranks.tolist())
    lh.save(tmp_path / "split.safetensors", split)
    lh.save(tmp_path / "packed.safetensors", ref, metadata={"backend": "reference"})
    for name, layout in (("split", "split"), ("packed", "packed")):
        result = lh.load_result(tmp_path / f"{name}.safetensors")
        assert result.layout == layout and result.ranks.tolist() == [3, 1]
        assert lh.judge(loaded, 3, result).ok
    with pytest.raises(lh.FileError, match="missing.safetensors"):
        lh.load_batch(tmp_path / "missing.safetensors")


def test_calls_from_several_threads():
    cases = lh.random_batches(11, 8, k=[7, 20])
    failures = []

    def work(case):
        try:
            for _ in range(3):
                report = lh.judge(case.batch, case.k, lh.run("cpu", case.batch, case.k, ranks=case.ranks))
                assert report.ok, report
                lh.random_batch(case.seed, 40)
        except BaseException as e:  # noqa: B036 - reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=work, args=(case,)) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


def test_ctypes_declarations_match_the_c_layout():
    layout = os.environ.get("LOGPROBS_CAPI_LAYOUT")
    if not layout:
        pytest.skip("LOGPROBS_CAPI_LAYOUT (the test_capi_layout program) not given")
    from logprobs_harness import _native

    structs = {"logprobs_batch_view": _native.BatchView, "logprobs_result_view": _native.ResultView,
               "logprobs_backend_info": _native.BackendInfo, "logprobs_tolerance": _native.Tolerance,
               "logprobs_violation": _native.Violation, "logprobs_stats": _native.Stats,
               "logprobs_row_location": _native.RowLocation, "logprobs_diagnosis": _native.Diagnosis,
               "logprobs_random_options": _native.RandomOptions}
    lines = subprocess.run([layout], capture_output=True, text=True, check=True).stdout.split("\n")
    checked = 0
    for line in filter(None, lines):
        what, number = line.rsplit(" ", 1)
        if what.endswith(" size"):
            assert __import__("ctypes").sizeof(structs[what[:-5]]) == int(number), line
        else:
            struct, field = what.split(".")
            assert getattr(structs[struct], field).offset == int(number), line
        checked += 1
    assert checked == len(lines) - 1 and checked > 60


def test_the_library_exports_only_the_c_api():
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lh.library_path)], capture_output=True, text=True)
    if nm.returncode != 0:
        pytest.skip("no nm here")
    names = [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]
    assert names and all(name.startswith("logprobs_") for name in names), [n for n in names if "logprobs_" not in n]


def test_a_missing_library_is_a_clear_import_error(tmp_path):
    env = dict(os.environ, LOGPROBS_HARNESS_LIBRARY=str(tmp_path / "nowhere.so"))
    done = subprocess.run([sys.executable, "-c", "import logprobs_harness"], capture_output=True, text=True, env=env)
    assert done.returncode != 0
    assert "cannot load liblogprobs_c.so" in done.stderr and "LOGPROBS_HARNESS_LIBRARY" in done.stderr
