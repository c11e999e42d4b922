"""The honest and the faulty kernels that hold the judge to its promise (SPEC §5): every honest f32
kernel passes on every row shape LLMs produce, and every faulty one fails where it is wrong.

Row kinds (`ROW_KINDS`): spread (N(0, 2) logits), zipf (a log-rank prior with noise, the shape of
a language model's next-token distribution), confident12/16/20 (a flat N(0, 2) sea and one logit
12, 16 or 20 above its centre: a sure next token), masked (spread with 30% of the entries -inf)
and bf16 (spread logits stored as bf16). Each batch has ROWS batch items of one output row each,
with or without temperatures.

Kernels take (batch, k) and return the split layout (top_tokens, top_logprobs, sampled_logprobs)
as numpy arrays. They compute SPEC §2.5's x (logits widened to f32, divided by the temperature in
f32) and then log-probabilities their own way. Honest ones are f32 throughout, in the summation
orders real kernels use; each faulty one has one bug seen in the field.
"""
import numpy as np

import logprobs_harness as lh

VOCABS = (32000, 128256, 152064, 262144)
ROWS = 3
K = 20
ROW_KINDS = ("spread", "zipf", "confident12", "confident16", "confident20", "masked", "bf16")
F32 = np.float32


def _bf16_round(x):
    """x rounded to nearest bf16 (ties to even), kept as f32 values."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(F32)


def row_logits(kind, vocab, rng):
    """One row of logits of that kind, as f32."""
    if kind == "zipf":
        ranks = rng.permutation(vocab).astype(np.float64) + 1
        return (-1.1 * np.log(ranks) + rng.normal(0, 0.5, vocab)).astype(F32)
    x = rng.normal(0, 2, vocab).astype(F32)
    if kind.startswith("confident"):
        x[rng.integers(vocab)] = F32(kind[len("confident"):])
    elif kind == "masked":
        x[rng.random(vocab) < 0.3] = -np.inf
    elif kind == "bf16":
        x = _bf16_round(x)
    return x


def make_batch(kind, vocab, temperatures, seed=0):
    """ROWS batch items of one row each; the first evaluates its top token (greedy), the others a
    random candidate."""
    rng = np.random.default_rng([seed, vocab, ROW_KINDS.index(kind), int(temperatures)])
    logits = np.stack([row_logits(kind, vocab, rng) for _ in range(ROWS)])
    sampled = [int(np.argmax(logits[0]))]
    for row in logits[1:]:
        candidates = np.flatnonzero(row > -np.inf)
        sampled.append(int(rng.choice(candidates)))
    temps = [0.6, 1.0, 1.4][:ROWS] if temperatures else None
    if kind == "bf16":
        bits = (logits.view(np.uint32) >> 16).astype(np.uint16)
        return lh.Batch(bits, sampled, dtype="bf16", temperatures=temps)
    return lh.Batch(logits, sampled, temperatures=temps)


def spec_x(batch):
    """SPEC §2.5's x of each output row [N, V], f32, and each row's evaluated token."""
    plan = batch.plan()
    x = batch.torch_logits()[list(plan.logit_rows)].float().numpy()
    if batch.temperatures is not None:
        t = np.asarray(batch.temperatures.tolist(), dtype=F32)[list(plan.batch_items)]
        x = x / t[:, None]  # IEEE f32 division
    return x, np.asarray(plan.tokens, dtype=np.int64)


def split_result(x, lp, tokens, k):
    """The split layout from log-probabilities lp [N, V] (rows with at least k candidates)."""
    keyed = np.where(x > -np.inf, x, -np.inf)
    top = np.argpartition(-keyed, k - 1, axis=1)[:, :k]
    rows = np.arange(len(x))[:, None]
    return dict(top_tokens=top.astype(np.uint32), top_logprobs=lp[rows, top].astype(F32),
                sampled_logprobs=lp[np.arange(len(x)), tokens].astype(F32))


def per_row(normalizer_of):
    """A kernel that computes each row's normalizer n (f32) by `normalizer_of(x)` and each value
    as x + n in f32 (x - (m + log S), as fused kernels write it)."""

    def kernel(batch, k):
        x, tokens = spec_x(batch)
        lp = np.stack([row + normalizer_of(row) for row in x]).astype(F32)
        return split_result(x, lp, tokens, k)

    kernel.__name__ = normalizer_of.__name__
    kernel.__doc__ = normalizer_of.__doc__
    return kernel


def _exponentials(x):
    m = x.max()
    return m, np.exp(x - m).astype(F32)  # exp(-inf) = 0


def _lane_sum(e, lanes):
    """Entry j in lane j mod `lanes`, each lane in index order (a reduction over the leading axis
    adds rows one after another), then the lanes pairwise: a SIMD loop and its horizontal add."""
    padded = np.zeros(-(-len(e) // lanes) * lanes, dtype=F32)
    padded[:len(e)] = e
    sums = np.add.reduce(padded.reshape(-1, lanes), axis=0, dtype=F32)
    while len(sums) > 1:
        sums = (sums[0::2] + sums[1::2]).astype(F32)
    return sums[0]


# ---- honest kernels ---------------------------------------------------------------------------

def torch_log_softmax(batch, k):
    """PyTorch's f32 log_softmax (vLLM's way)."""
    import torch

    x, tokens = spec_x(batch)
    lp = torch.log_softmax(torch.from_numpy(x), dim=-1).numpy()
    return split_result(x, lp, tokens, k)


@per_row
def numpy_two_pass(x):
    """NumPy: max, then the f32 sum of exp(x - m) (NumPy's pairwise sum)."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(np.sum(e, dtype=F32))))


@per_row
def lanes4(x):
    """A 4-lane SIMD loop (SSE, NEON) with one accumulator."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(_lane_sum(e, 4))))


@per_row
def lanes16(x):
    """A 16-lane SIMD loop (AVX-512) with one accumulator."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(_lane_sum(e, 16))))


@per_row
def online_gpu(x):
    """A GPU block's online softmax: 256 threads, each over the entries j = t mod 256 with its own
    running max (its sum rescaled by exp(m_old - m_new) when the max grows), then a tree of
    (max, sum) pairs over the threads."""
    threads = 256
    padded = np.full(-(-len(x) // threads) * threads, -np.inf, dtype=F32)
    padded[:len(x)] = x
    m = np.full(threads, -np.inf, dtype=F32)
    s = np.zeros(threads, dtype=F32)
    with np.errstate(invalid="ignore"):
        for step in padded.reshape(-1, threads):
            new_m = np.maximum(m, step)
            live = new_m > -np.inf
            scale = np.where(live, np.exp(m - new_m), F32(0)).astype(F32)
            term = np.where(live, np.exp(step - new_m), F32(0)).astype(F32)
            s = (s * scale + term).astype(F32)
            m = new_m
        while len(m) > 1:
            top = np.maximum(m[0::2], m[1::2])
            left = np.where(m[0::2] > -np.inf, s[0::2] * np.exp(m[0::2] - top), F32(0))
            right = np.where(m[1::2] > -np.inf, s[1::2] * np.exp(m[1::2] - top), F32(0))
            s, m = (left + right).astype(F32), top
    return F32(-(m[0] + np.log(s[0])))


@per_row
def kahan64(x):
    """64 lanes, each a Kahan-compensated f32 sum."""
    mx, e = _exponentials(x)
    padded = np.zeros(-(-len(e) // 64) * 64, dtype=F32)
    padded[:len(e)] = e
    total = np.zeros(64, dtype=F32)
    carry = np.zeros(64, dtype=F32)
    for step in padded.reshape(-1, 64):
        y = (step - carry).astype(F32)
        t = (total + y).astype(F32)
        carry = ((t - total) - y).astype(F32)
        total = t
    return F32(-(mx + np.log(_lane_sum(total, 64))))


@per_row
def f64_accumulation(x):
    """f32 exponentials summed in f64 (what a careful CPU kernel does)."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(np.sum(e, dtype=np.float64))))


HONEST = (torch_log_softmax, numpy_two_pass, lanes4, lanes16, online_gpu, kahan64, f64_accumulation)

# ---- faulty kernels ---------------------------------------------------------------------------


def values_rounded_bf16(batch, k):
    """Right log-probabilities, returned in bf16 (a model's output dtype)."""
    out = torch_log_softmax(batch, k)
    return {name: _bf16_round(v) if v.dtype == F32 else v for name, v in out.items()}


def log_softmax_f16(batch, k):
    """log_softmax computed in f16."""
    x, tokens = spec_x(batch)
    h = x.astype(np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        m = h.max(axis=1, keepdims=True)
        lp = ((h - m) - np.log(np.sum(np.exp(h - m), axis=1, keepdims=True, dtype=np.float16))).astype(F32)
    return split_result(x, lp, tokens, k)


@per_row
def shifted_2e5(x):
    """Every value of the row 2e-5 too high (an error the v2 rule let through on spread rows)."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(np.sum(e, dtype=np.float64))) + 2e-5)


@per_row
def top1024_normalizer(x):
    """The normalizer over the 1024 largest candidates only (a top-k-then-softmax shortcut)."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(np.sum(np.sort(e)[-1024:], dtype=np.float64))))


@per_row
def padding_counted(x):
    """64 padding entries of logit 0 (a vocabulary padded for tensor parallelism) counted in S."""
    m, e = _exponentials(x)
    return F32(-(m + np.log(np.sum(e, dtype=np.float64) + 64 * np.exp(-np.float64(m)))))


# Each faulty kernel, with where it must fail: where its error is beyond what honest f32
# arithmetic makes on that row. 64 entries of logit 0 against a largest logit of 12 to 20, or a
# uniform 2e-5, is within what honest lane sums drift on confident rows (docs/logprobs-check.md's
# table). With temperatures (T = 0.6 makes the values reach -30) 2e-5 is ten f32 ulps of the
# values themselves, near the output's and the normalizer's own rounding (4 ulp each): the
# shifted kernel must fail without them.
def _everywhere(kind, temperatures):
    return True


def _not_confident(kind, temperatures):
    return not kind.startswith("confident")


def _not_confident_nor_tempered(kind, temperatures):
    return _not_confident(kind, temperatures) and not temperatures


FAULTY = {values_rounded_bf16: _everywhere, log_softmax_f16: _everywhere, shifted_2e5: _not_confident_nor_tempered,
          top1024_normalizer: _everywhere, padding_counted: _not_confident}


# The class the diagnosis must name on each faulty kernel's failures, and no other (issue 22).
DIAGNOSED = {values_rounded_bf16: "values_rounded_bf16", log_softmax_f16: "values_rounded_f16",
             shifted_2e5: "normalizer_shift", top1024_normalizer: "normalizer_missing_mass",
             padding_counted: "normalizer_extra_mass"}


def judged(kernel, batch, **tolerance):
    """The kernel's result for the batch at K, judged (by the default tolerance unless told)."""
    return lh.judge(batch, K, **kernel(batch, K), limit=5, **tolerance)
