"""Tests that python/tests/test_plugin.py runs in a pytest of their own, through the plugin: a
backend that keeps the contract, a kernel with a planted value fault, one whose values are rounded
to bf16 (a class the diagnosis names), and one that crashes."""
import struct

import pytest

import logprobs_harness as lh


def test_cpu_backend(logprobs_case):
    case = logprobs_case
    case.assert_agrees(lh.run("cpu", case.batch, case.k, ranks=case.ranks))


def planted_kernel(batch, k):
    """The reference's result, with a planted fault: in rows of more than 64 logits, the first
    top value is 1e-3 too large."""
    result = lh.reference(batch, k)
    values = result.lp_logits.tolist()
    if batch.vocab > 64:
        for row in values:
            row[0] += 1e-3
    return lh.Result.packed(values, result.lp_tokens.tolist(), k=k)


@pytest.mark.logprobs(k=5)
def test_planted_kernel(logprobs_case):
    logprobs_case.assert_agrees(planted_kernel(logprobs_case.batch, logprobs_case.k))


def to_bf16(v):
    """v rounded to the nearest bf16 (ties to even), as a float; infinities and NaN kept."""
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    if bits & 0x7F800000 == 0x7F800000:
        return v
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def bf16_kernel(batch, k):
    """The reference's result with every value rounded to bf16 (a 16-bit output dtype)."""
    result = lh.reference(batch, k)
    values = [[to_bf16(v) for v in row] for row in result.lp_logits.tolist()]
    return lh.Result.packed(values, result.lp_tokens.tolist(), k=k)


@pytest.mark.logprobs(k=5)
def test_bf16_kernel(logprobs_case):
    logprobs_case.assert_agrees(bf16_kernel(logprobs_case.batch, logprobs_case.k))


@pytest.mark.logprobs(k=5)
def test_crashing_kernel(logprobs_case):
    if logprobs_case.batch.vocab > 30 and logprobs_case.batch.output_rows > 0:
        raise IndexError(f"the kernel's table holds 30 entries, not {logprobs_case.batch.vocab}")
