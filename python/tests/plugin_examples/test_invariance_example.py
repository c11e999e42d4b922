"""The logprobs_invariance fixture (docs/python.md's example): our cpu backend passes; a kernel
whose values depend on the row's position in the batch fails, shrunk, with its finding."""
import numpy

import logprobs_harness as lh


def cpu_kernel(batch, k):
    return lh.run("cpu", batch, k)


def test_the_cpu_backend_is_invariant(logprobs_invariance):
    logprobs_invariance(cpu_kernel, k=20)


def test_a_kernel_that_depends_on_the_row_position(logprobs_invariance):
    def kernel(batch, k):
        result = lh.run("cpu", batch, k)
        values = numpy.asarray(result.lp_logits).copy()
        values[1::2] = numpy.nextafter(values[1::2], numpy.float32(0))  # odd rows: one ulp off
        return {"lp_logits": values, "lp_tokens": numpy.asarray(result.lp_tokens)}

    logprobs_invariance(kernel, k=5, vocab=300)
