"""Batch and result files (SPEC §7) against Hugging Face's own safetensors library, both ways:
what the harness writes, safetensors reads with the same arrays, dtypes and metadata; what
safetensors writes, the harness reads. Runs in the max peer's environment (safetensors pinned
there), with its numpy and torch (bf16 has no numpy dtype)."""
import numpy
import pytest
import torch
from safetensors import safe_open
from safetensors.numpy import save_file as save_numpy
from safetensors.torch import save_file as save_torch

import logprobs_harness as lh

BATCH_ARRAYS = ("tokens", "sampled_tokens", "logit_row_offsets", "token_row_offsets", "lp_output_offsets")


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
def test_batches_the_harness_writes_load_in_safetensors(tmp_path, dtype):
    case = lh.random_batches(5, 1, k=7, dtype=dtype, offsets="echo", temperatures=True)[0]
    path = tmp_path / "batch.safetensors"
    lh.save_batch(path, case.batch, k=7, metadata={"origin": "test"})
    with safe_open(str(path), framework="pt") as f:  # bf16 has no numpy dtype: the logits as torch reads them
        logits = f.get_tensor("logits")
        assert f.metadata()["k"] == "7" and f.metadata()["origin"] == "test"
    assert logits.dtype == {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    assert _bits(logits) == _bits(case.batch.torch_logits())  # the file's dtype, every bit
    with safe_open(str(path), framework="np") as f:  # U32: torch 1.13 has no uint32
        for name in BATCH_ARRAYS:
            assert f.get_tensor(name).dtype == numpy.uint32 and f.get_tensor(name).tolist() == list(
                getattr(case.batch, name)), name
        assert f.get_tensor("temperatures").tobytes() == numpy.asarray(case.batch.temperatures).tobytes()


def _bits(tensor):
    return tensor.contiguous().view(torch.int16 if tensor.element_size() == 2 else torch.int32).tolist()


def test_results_the_harness_writes_load_in_safetensors(tmp_path):
    case = lh.random_batches(6, 1, k=5)[0]
    packed = lh.reference(case.batch, 5, ranks=True)
    path = tmp_path / "result.safetensors"
    lh.save_result(path, packed, metadata={"k": "5"})
    with safe_open(str(path), framework="np") as f:
        assert f.get_tensor("lp_logits").tobytes() == numpy.asarray(packed.lp_logits).tobytes()  # NaN too
        assert f.get_tensor("lp_tokens").tolist() == numpy.asarray(packed.lp_tokens).tolist()
        assert f.get_tensor("lp_ranks").tolist() == list(packed.ranks)
        assert f.metadata()["k"] == "5"


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float16, torch.bfloat16])
def test_batches_safetensors_writes_load_in_the_harness(tmp_path, dtype):
    rng = numpy.random.default_rng(3)
    logits = rng.normal(size=(5, 11)).astype(numpy.float32)
    arrays = {"tokens": numpy.array([4, 9, 1, 7], dtype=numpy.uint32),
              "sampled_tokens": numpy.array([2, 10], dtype=numpy.uint32),
              "logit_row_offsets": numpy.array([0, 3, 5], dtype=numpy.uint32),
              "token_row_offsets": numpy.array([0, 2, 4], dtype=numpy.uint32),
              "lp_output_offsets": numpy.array([0, 3, 5], dtype=numpy.uint32)}
    path = str(tmp_path / "batch.safetensors")
    if dtype is torch.bfloat16:
        tensors = {name: torch.from_numpy(a.view(numpy.int32)) for name, a in arrays.items()}
        save_torch({"logits": torch.from_numpy(logits).to(torch.bfloat16), **tensors}, path, metadata={"levels": "3"})
        # torch has no u32 before 2.3: the harness reads U32, so the header says U32 over the same bytes
        _retype(path, "I32", "U32")
    else:
        save_numpy({"logits": logits.astype(dtype), **arrays}, path, metadata={"levels": "3"})
    batch = lh.load_batch(path)
    assert batch.k == 7 and batch.dtype == {numpy.float32: "f32", numpy.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    expected = torch.from_numpy(logits).to(torch.bfloat16) if dtype is torch.bfloat16 else torch.from_numpy(
        logits.astype(dtype))
    assert _bits(batch.torch_logits()) == _bits(expected)
    for name, a in arrays.items():
        assert list(getattr(batch, name)) == a.tolist(), name
    assert lh.judge(batch, 7, lh.reference(batch, 7)).ok


def test_results_safetensors_writes_load_in_the_harness(tmp_path):
    case = lh.random_batches(8, 1, k=3)[0]
    ref = lh.reference(case.batch, 3)
    path = str(tmp_path / "result.safetensors")
    top_tokens = numpy.asarray(ref.lp_tokens)[:, :3].astype(numpy.uint32)
    values = numpy.asarray(ref.lp_logits)
    save_numpy({"top_tokens": top_tokens, "top_logprobs": values[:, :3].copy(),
                "sampled_logprobs": values[:, 3].copy()}, path, metadata={"k": "3"})
    result = lh.load_result(path)
    assert result.layout == "split" and result.k == 3
    assert lh.judge(case.batch, 3, result).ok


def _retype(path, old, new):
    """Rewrites the header's dtype names in place (same length, so no offset moves)."""
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = f.read(size).replace(f'"dtype":"{old}"'.encode(), f'"dtype":"{new}"'.encode())
        f.seek(8)
        f.write(header)
