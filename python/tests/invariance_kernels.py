"""numpy kernels for check_invariance's suites: one that computes each row alone in a fixed order
(invariant), and planted ones that are not, each the way such a kernel comes about."""
import itertools

import numpy


def lane_sum(e, lanes):
    """The sum of e in f32: entry j to lane j mod lanes (each lane in index order), then the lanes
    in order."""
    padded = numpy.zeros(-(-len(e) // lanes) * lanes, dtype=numpy.float32)
    padded[: len(e)] = e
    acc = padded.reshape(-1, lanes).sum(axis=0, dtype=numpy.float32)  # along axis 0: row after row
    total = numpy.float32(0)
    for lane in acc:
        total = numpy.float32(total + lane)
    return total


class RowKernel:
    """kernel(batch, k) -> the packed layout, each row alone: m, S = the lane sum of exp(x - m)
    (`lanes(context)` lanes), n = -(m + log S) in f32; the top K by descending x, ascending
    token, -inf and NaN left out, then padding (V, -inf + n)."""

    version = "test"

    def __init__(self, lanes=lambda context: 8, shift=lambda context: 0):
        self.lanes, self.shift, self.calls = lanes, shift, itertools.count()

    def __call__(self, batch, k):
        call = next(self.calls)
        x, plan = batch.numpy_x(), batch.plan()
        n_rows = len(plan)
        values = numpy.zeros((n_rows, k + 1), dtype=numpy.float32)
        tokens = numpy.zeros((n_rows, k + 1), dtype=numpy.uint32)
        for o in range(n_rows):
            context = {"rows": n_rows, "row": o, "k": k, "call": call, "stride": batch.row_stride,
                       "first_row": batch.logit_row_offsets[0]}
            row = x[o]
            with numpy.errstate(all="ignore"):
                m = numpy.float32(row[~numpy.isnan(row)].max()) if (~numpy.isnan(row)).any() else numpy.float32("nan")
                e = numpy.exp((row - m).astype(numpy.float32)).astype(numpy.float32)
                n = numpy.float32(-(m + numpy.log(lane_sum(e, self.lanes(context)))))
                n = numpy.float32(n + numpy.float32(self.shift(context)) * numpy.spacing(n))
                candidates = [j for j in numpy.argsort(-row, kind="stable") if row[j] > -numpy.inf]
                top = candidates[:k] + [batch.vocab] * max(0, k - len(candidates))
                for slot, j in enumerate(top):
                    tokens[o, slot] = j
                    values[o, slot] = (row[j] if j < batch.vocab else -numpy.inf) + n
                tokens[o, k], values[o, k] = plan.tokens[o], row[plan.tokens[o]] + n
        return {"lp_logits": values, "lp_tokens": tokens}


def invariant():
    return RowKernel()


def lanes_by_row_count():
    """A sum whose lane count follows the batch's row count (wider vectors for bigger batches)."""
    return RowKernel(lanes=lambda c: 4 if c["rows"] < 4 else 16)


def by_position():
    """A value that depends on the row's position in the batch (a per-block correction)."""
    return RowKernel(shift=lambda c: c["row"] % 2)


def order_per_call():
    """A sum whose order changes from call to call (work split by whichever thread is free)."""
    return RowKernel(lanes=lambda c: (4, 8, 16)[c["call"] % 3])


def by_k():
    """A normalizer that depends on K (a wider top-K buffer changes the sum's blocking)."""
    return RowKernel(lanes=lambda c: 4 if c["k"] < 8 else 32)


def by_alignment():
    """A vector path chosen by where the rows start (an unaligned stride takes the scalar loop)."""
    return RowKernel(lanes=lambda c: 8 if c["stride"] % 8 == 0 and c["first_row"] == 0 else 1)
