"""A PyTorch kernel checked through the plugin (the README's example): logprobs computed as
vLLM does (f32 log_softmax, topk, gather), made to keep the whole contract (ragged rows,
temperatures, NaN and infinities, padding); and the same with log_softmax in bf16, which fails.

Both are judged by the default tolerance. (Under contract v2's sigma * sqrt(V) rule PyTorch's own
f32 log_softmax failed on the generators' peaked rows, one logit 16.6 above a flat sea, where each
addition to a lane holding the peak rounds the same way: at V = 1230 it gave -8.33e-5 for a
log-probability of -7.59e-5. The calibrated rule of v3 measures that drift on the row itself.)"""
import pytest

import logprobs_harness as lh

torch = pytest.importorskip("torch")


def torch_logprobs(batch, k, compute_dtype=torch.float32):
    plan = batch.plan()  # each output row's logit row, evaluated token and batch item (SPEC §2)
    x = batch.torch_logits()[plan.logit_rows].float()
    if batch.temperatures is not None:
        x = x / torch.tensor(batch.temperatures.tolist())[plan.batch_items].unsqueeze(-1)
    logprobs = torch.log_softmax(x.to(compute_dtype), dim=-1).float()
    top_x, top_tokens = torch.topk(torch.where(x.isnan(), float("-inf"), x), min(k, batch.vocab), dim=-1)
    top_logprobs = logprobs.gather(-1, top_tokens)
    # Fewer than K candidates: padding slots (token V, value -inf + the normalizer).
    padding = torch.where(logprobs.isnan().any(-1, keepdim=True), float("nan"), float("-inf"))
    top_tokens = torch.where(top_x == float("-inf"), batch.vocab, top_tokens)
    top_logprobs = torch.where(top_x == float("-inf"), padding, top_logprobs)
    missing = k - top_tokens.shape[1]
    top_tokens = torch.cat([top_tokens, torch.full((len(plan), missing), batch.vocab)], dim=1)
    top_logprobs = torch.cat([top_logprobs, padding.expand(len(plan), missing)], dim=1)
    sampled = torch.tensor(plan.tokens, dtype=torch.long).unsqueeze(-1)
    ranks = (x >= x.gather(-1, sampled)).sum(-1)
    return top_tokens, top_logprobs, logprobs.gather(-1, sampled).squeeze(-1), ranks


@pytest.mark.logprobs(k=20)
def test_torch_kernel(logprobs_case):
    case = logprobs_case
    top_tokens, top_logprobs, sampled_logprobs, ranks = torch_logprobs(case.batch, case.k)
    case.assert_agrees(top_tokens=top_tokens, top_logprobs=top_logprobs, sampled_logprobs=sampled_logprobs,
                       ranks=ranks if case.ranks else None)


@pytest.mark.logprobs(k=20, finite=True)
def test_torch_kernel_in_bf16(logprobs_case):
    case = logprobs_case
    top_tokens, top_logprobs, sampled_logprobs, _ = torch_logprobs(case.batch, case.k, torch.bfloat16)
    case.assert_agrees(top_tokens=top_tokens, top_logprobs=top_logprobs, sampled_logprobs=sampled_logprobs)
