"""A real client judged through the package: PyTorch computes logprobs as vLLM's sampler does
(vllm/v1/sample/sampler.py, compute_logprobs and gather_logprobs: log_softmax over the f32
logits, topk, the sampled token's logprob gathered and put first, its rank counted as the
logprobs >= its own) on LLM-shaped rows at V = 32000, 128256 and 152064, and the split result
passes at the default tolerance. The same code with a fault planted fails under the rule the
fault breaks: log_softmax in bf16 (value), -inf clamped to -9999 as servers do for JSON (value),
top-k off by one (not_top), ranks counted with > instead of >= (rank)."""
import os
import subprocess

import pytest

import logprobs_harness as lh

torch = pytest.importorskip("torch")

VOCABS = (32000, 128256, 152064)
ROWS = 4
K = 20


def llm_batch(vocab, seed):
    """bf16 logits shaped like a language model's: a Zipf-like prior over the vocabulary (log-rank
    falloff, a few tokens far above the rest), noise and 8 masked (-inf) tokens a row; row 0
    samples greedily, row 1 a token of the tail, row 2 a masked token, row 3 greedily."""
    generator = torch.Generator().manual_seed(seed)
    ranks = torch.randperm(vocab, generator=generator).to(torch.float32) + 1
    logits = 12.0 - 2.5 * torch.log(ranks) + 1.5 * torch.randn(ROWS, vocab, generator=generator)
    masked = torch.randint(0, vocab, (ROWS, 8), generator=generator)
    logits.scatter_(1, masked, float("-inf"))
    logits = logits.to(torch.bfloat16)
    sampled = torch.argmax(logits.float(), dim=-1)
    sampled[1] = 7
    sampled[2] = masked[2, 0]
    return lh.Batch(logits, sampled), logits, sampled


def vllm_logprobs(logits, sampled, k, compute_dtype=torch.float32, clamp=False, topk_off_by_one=False,
                  ranks_greater=False):
    """vLLM's LogprobsTensors for the sampled tokens: ids and logprobs [N, K + 1] with the sampled
    token first, and its rank [N]. The keyword arguments plant the faults."""
    logprobs = torch.log_softmax(logits.to(compute_dtype), dim=-1).to(torch.float32)
    if clamp:
        logprobs = logprobs.clamp(min=-9999.0)
    if topk_off_by_one:
        top = torch.topk(logprobs, k + 1, dim=-1)
        topk_logprobs, topk_indices = top.values[:, 1:], top.indices[:, 1:]
    else:
        topk_logprobs, topk_indices = torch.topk(logprobs, k, dim=-1)
    token_ids = sampled.long().unsqueeze(-1)
    token_logprobs = logprobs.gather(-1, token_ids)
    counted = logprobs > token_logprobs if ranks_greater else logprobs >= token_logprobs
    token_ranks = counted.sum(-1)
    return torch.cat((token_ids, topk_indices), dim=1), torch.cat((token_logprobs, topk_logprobs), dim=1), token_ranks


def split_arrays(tensors):
    """vLLM's tensors in the split layout of SPEC §7 (the sampled token's column apart)."""
    ids, logprobs, ranks = tensors
    return dict(top_tokens=ids[:, 1:], top_logprobs=logprobs[:, 1:], sampled_logprobs=logprobs[:, 0], ranks=ranks)


@pytest.fixture(scope="module", params=VOCABS, ids=lambda v: f"V{v}")
def case(request):
    return llm_batch(request.param, seed=2026 + request.param)


def test_vllm_way_passes(case):
    batch, logits, sampled = case
    report = lh.judge(batch, K, **split_arrays(vllm_logprobs(logits, sampled, K)))
    print(f"V = {batch.vocab}: {report.summary()}")
    assert report.ok, report.violations[:5]
    assert report.rows == ROWS and 0 < report.tolerance_used < 0.5
    assert float("-inf") in split_arrays(vllm_logprobs(logits, sampled, K))["sampled_logprobs"].tolist()


@pytest.mark.parametrize("fault, rules", [
    (dict(compute_dtype=torch.bfloat16), {"value"}),  # and what the rounding breaks besides (ties)
    (dict(clamp=True), {"value"}),
    (dict(topk_off_by_one=True), {"not_top"}),
    (dict(ranks_greater=True), {"rank"}),
], ids=["log_softmax_in_bf16", "inf_clamped_to_9999", "topk_off_by_one", "ranks_with_greater"])
def test_planted_fault_fails_under_its_rule(case, fault, rules):
    batch, logits, sampled = case
    report = lh.judge(batch, K, **split_arrays(vllm_logprobs(logits, sampled, K, **fault)))
    print(f"V = {batch.vocab}, {fault}: {report.summary()}; first: {report.violations[0].message}")
    assert not report.ok
    if "compute_dtype" in fault:
        assert rules <= set(report.rules) and report.tolerance_used > 10
    else:
        assert set(report.rules) == rules
    if "clamp" in fault:
        first = report.violations[0]
        assert (first.row, first.slot, first.token) == (2, K, int(sampled[2])) and "-9999" in first.message


def test_assert_agrees_names_the_files_and_the_command_that_replay_it(tmp_path):
    batch, logits, sampled = llm_batch(32000, seed=7)
    assert lh.assert_agrees(batch, K, **split_arrays(vllm_logprobs(logits, sampled, K))).ok
    with pytest.raises(AssertionError) as raised:
        lh.assert_agrees(batch, K, replay_dir=tmp_path, **split_arrays(vllm_logprobs(logits, sampled, K, clamp=True)))
    failure = raised.value
    assert "value: batch 2, output row 2, slot 20" in str(failure) and "replay: " in str(failure)
    if os.environ.get("LOGPROBS_CHECK"):
        done = subprocess.run(failure.commands[0], shell=True, capture_output=True, text=True)
        assert done.returncode == 1 and "got -9999 want -inf" in done.stdout, done.stdout + done.stderr


def test_cuda_tensors_are_copied_to_the_host():
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA device")
    batch, logits, sampled = llm_batch(32000, seed=3)
    on_device = {name: t.cuda() for name, t in split_arrays(vllm_logprobs(logits, sampled, K)).items()}
    assert lh.judge(lh.Batch(logits.cuda(), sampled.cuda()), K, **on_device).ok
