#!/usr/bin/env python3
"""A real client judged: PyTorch computes logprobs the way vLLM does (f32 log_softmax, topk, gather
of the sampled token, the split result layout) on LLM-shaped rows at V in {32000, 128256, 152064},
and `logprobs-check verify` judges it. It passes at the default tolerance; the same computation
with log_softmax in bf16 (a real bug: vLLM computes it in f32) fails. Prints the tolerance used
by each, the figure to read beside the SPEC's claim that PyTorch's f32 log_softmax uses about a
third of the default.

    real_client.py LOGPROBS_CHECK [WORK_DIR]     exit 0 as described, 1 otherwise, 77 without torch
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("real_client: SKIP: this interpreter has no torch (Debian's python3-torch serves /usr/bin/python3)")
    sys.exit(77)

VOCABS = (32000, 128256, 152064)
ROWS = 4
K = 20


def save_safetensors(path, tensors, metadata):
    """A safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    dtypes = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "U32"}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, tensor in tensors.items():
        data = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": dtypes[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def llm_rows(vocab, generator):
    """bf16 logits shaped like a language model's: a Zipf-like prior over the vocabulary (log-rank
    falloff, a few tokens far above the rest), noise, and a few masked (-inf) tokens."""
    ranks = torch.randperm(vocab, generator=generator).to(torch.float32) + 1
    prior = 12.0 - 2.5 * torch.log(ranks)
    logits = prior + 1.5 * torch.randn(ROWS, vocab, generator=generator)
    masked = torch.randint(0, vocab, (ROWS, 8), generator=generator)
    logits.scatter_(1, masked, float("-inf"))
    return logits.to(torch.bfloat16)


def vllm_logprobs(logits, sampled, compute_dtype):
    """vLLM's sampler: log_softmax over the f32 logits, topk, and a gather of the sampled token."""
    logprobs = torch.log_softmax(logits.to(compute_dtype), dim=-1).to(torch.float32)
    top_logprobs, top_tokens = torch.topk(logprobs, K, dim=-1)
    sampled_logprobs = logprobs.gather(-1, sampled.long().unsqueeze(-1)).squeeze(-1)
    return top_tokens.to(torch.int32), top_logprobs, sampled_logprobs


def verify(check, work, name, vocab, compute_dtype, generator):
    logits = llm_rows(vocab, generator)
    sampled = torch.argmax(logits.to(torch.float32), dim=-1).to(torch.int32)  # greedy, as in an eval
    sampled[1] = 7  # and one sampled token from the tail
    offsets = torch.arange(ROWS + 1, dtype=torch.int32)
    batch = os.path.join(work, f"{name}_batch.safetensors")
    result = os.path.join(work, f"{name}_result.safetensors")
    report = os.path.join(work, f"{name}.json")
    save_safetensors(batch, {"logits": logits, "tokens": torch.zeros(0, dtype=torch.int32), "sampled_tokens": sampled,
                             "logit_row_offsets": offsets, "token_row_offsets": torch.zeros(ROWS + 1, dtype=torch.int32),
                             "lp_output_offsets": offsets}, {"k": str(K)})
    top_tokens, top_logprobs, sampled_logprobs = vllm_logprobs(logits, sampled, compute_dtype)
    save_safetensors(result, {"top_tokens": top_tokens, "top_logprobs": top_logprobs,
                              "sampled_logprobs": sampled_logprobs}, {"backend": f"torch-{name}"})
    done = subprocess.run([check, "verify", "--input", batch, "--result", result, "--json", report],
                          capture_output=True, text=True)
    cell = json.load(open(report))["results"][0] if os.path.exists(report) else {}
    return done.returncode, cell, done.stdout + done.stderr


def main():
    check = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="real_client_")
    os.makedirs(work, exist_ok=True)
    generator = torch.Generator().manual_seed(2026)
    ok = True
    for vocab in VOCABS:
        for dtype, want in ((torch.float32, 0), (torch.bfloat16, 1)):
            name = f"v{vocab}_{str(dtype).split('.')[-1]}"
            code, cell, output = verify(check, work, name, vocab, dtype, generator)
            used = cell.get("max_tolerance_used", float("nan"))
            error = cell.get("max_abs_error", float("nan"))
            verdict = "pass" if code == 0 else "fail"
            print(f"real_client: V = {vocab:6d}, log_softmax in {str(dtype).split('.')[-1]:8s}: {verdict} "
                  f"(exit {code}), max abs error {error:.3g}, tolerance used {used:.3g}")
            if code != want:
                ok = False
                print(f"real_client: FAIL: want exit {want}\n{output}")
    print("real_client:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
