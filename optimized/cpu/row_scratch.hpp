// What a thread of the cpu backend keeps from call to call (cpu_backend.cpp): a row's candidate
// buffer and its chunks' statistics, and, where it calls split_rows, the split step's state.
//
// Why kept: made per call, a decode step at large K paid for fresh memory. At K = 65535 the buffer
// is about 1 MB, which glibc maps anew for each call whenever it is above malloc's (moving) mmap
// threshold, and its pages were then faulted in and zeroed every time (1 x 128256, 1 thread: a
// quarter of perf's samples in page faults and memset, 0.76-0.79 ms a call; kept, 0.23 ms). And a
// split step's part buffers were allocated by the calling thread, grown and zeroed by the threads
// that scan the parts, and freed by the caller again: a decode step (1 x 128256 f32 at 2 threads,
// calls in turn in one process on Zen 5) took 1.05x the time at K = 0 and 1.10x at 20 and 255, and
// the step's other vectors, made per call, 1.02-1.03x more. Kept, the memory stays with the thread
// until it exits.
#pragma once

#include <cstdint>
#include <vector>

#include "candidate_buffer.hpp"
#include "row_kernel.hpp"
#include "row_source.hpp"

namespace logprobs::cpu {

struct RowScratch {
  CandidateBuffer buffer;  // a whole row's, or a split row's merge (and its sample)
  std::vector<ChunkScan> scans, ignored;
  std::vector<float> x;  // a row's x, where they are not its bytes (cut_from_row)
  // split_rows' rows, samples and parts (each part's buffer and its chunks' statistics).
  struct SplitState {
    std::vector<RowSource> rows;
    std::vector<float> speculative, xs;
    std::vector<CandidateBuffer> parts;
    std::vector<ChunkScan> scans;
  } split;
};

// This thread's scratch, its statistics sized for a row of `chunks` chunks.
inline RowScratch& thread_scratch(std::uint64_t chunks) {
  thread_local RowScratch scratch;
  scratch.scans.resize(chunks);
  scratch.ignored.resize(chunks);
  return scratch;
}

}  // namespace logprobs::cpu
