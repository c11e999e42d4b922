// The `max` backend: a faithful port of Modular MAX's compute_log_probabilities_1tok, so the
// harness can show how the contract relates to MAX's kernel and how far optimized backends
// outrun it. It implements what MAX's kernel does, contract version 1 (f32 logits, K = 2^L - 1,
// no temperatures, no ranks), and declares its one f32 chain of sums (SPEC §5). Deliberately
// unoptimized; keep it faithful rather than fast:
//   - f32 scalar, three passes over the row: max, sum of exp, then a heap pass;
//   - a fixed-height min-heap of K = 2^levels - 1 slots, all starting as (V, -inf);
//   - an element replaces the root only when strictly greater, so NaN and -inf never enter,
//     and among ties the earliest tokens stay;
//   - heap_down always runs levels - 1 steps (no early exit) and sinks past equal children;
//   - top slots are written in the heap's array order.
#include <bit>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "row_backend.hpp"

namespace logprobs {
namespace {

struct HeapEntry {
  float value;
  std::uint32_t token;
};

// Restores the min-heap after the root changed, as MAX does: the entry moves down past a child
// that is smaller OR EQUAL (MAX keeps it only where it is strictly smaller than the child), so
// among ties the newcomer sinks; every step runs, as in MAX's fixed-trip-count loop.
void heap_down(std::vector<HeapEntry>& heap, int levels) {
  std::size_t idx = 0;
  for (int step = 0; step < levels - 1; ++step) {
    const std::size_t left = 2 * idx + 1;
    const std::size_t right = left + 1;
    const std::size_t child = heap[right].value < heap[left].value ? right : left;
    if (!(heap[idx].value < heap[child].value)) {
      std::swap(heap[child], heap[idx]);
      idx = child;
    }
  }
}

void compute_row(const RaggedBatch& batch, const RowTask& task, std::uint32_t k, const LogprobsOutput& out) {
  const int levels = std::bit_width(k);  // K = 2^levels - 1: the port runs only those
  const float* x = batch.logit_row(task.logit_row).data();
  const std::uint64_t vocab = batch.vocab;

  float max_value = -std::numeric_limits<float>::infinity();
  for (std::uint64_t j = 0; j < vocab; ++j) max_value = max_value < x[j] ? x[j] : max_value;
  float sum = 0.0f;
  for (std::uint64_t j = 0; j < vocab; ++j) sum += std::exp(x[j] - max_value);
  const float n = -(max_value + std::log(sum));

  std::vector<HeapEntry> heap(k, {-std::numeric_limits<float>::infinity(), static_cast<std::uint32_t>(vocab)});
  if (k > 0) {
    for (std::uint64_t j = 0; j < vocab; ++j) {
      if (x[j] > heap[0].value) {
        heap[0] = {x[j], static_cast<std::uint32_t>(j)};
        heap_down(heap, levels);
      }
    }
  }

  float* values = out.row_values(task.output_row);
  std::uint32_t* tokens = out.row_tokens(task.output_row);
  for (std::uint32_t slot = 0; slot < k; ++slot) {
    tokens[slot] = heap[slot].token;
    values[slot] = heap[slot].value + n;
  }
  tokens[k] = task.token;
  values[k] = x[task.token] + n;
}

}  // namespace

std::unique_ptr<Backend> make_max_backend() {
  return make_row_backend({.name = "max",
                           .description = "port of Modular MAX's kernel: f32 scalar, three passes, fixed-height "
                                          "min-heap (contract v1: f32, K = 2^L - 1)",
                           .features = {},
                           .sums_in_one_chain = true},
                          compute_row);
}

}  // namespace logprobs
