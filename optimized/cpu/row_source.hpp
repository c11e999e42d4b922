// One logit row as the kernel reads it: its entries in their dtype, and the SPEC §2.5 transform
// to x (widened exactly to f32, then divided by the batch item's temperature, an IEEE f32
// division). The SIMD kernel applies the same transform lane by lane; this scalar form serves
// the cold paths (the speculation sample, the ascending-row seed, the evaluated token's slot),
// which must see the very same x.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "logprobs/batch.hpp"

namespace logprobs::cpu {

struct RowSource {
  const std::byte* row = nullptr;  // entry 0 of the row
  LogitsDtype dtype = LogitsDtype::f32;
  std::optional<float> temperature;
  // Where the row below this one in its batch starts, 0 where unknown: what a thread that scans
  // whole rows mostly reads next. An address, not a pointer: past the batch's last row it points
  // at nothing, and is only ever prefetched.
  std::uintptr_t row_below = 0;

  // A plain f32 row.
  explicit RowSource(const float* f32_row) : row(reinterpret_cast<const std::byte*>(f32_row)) {}
  // T = 1, a common request, is no temperature: x / 1 is x for every x but a signaling NaN, which
  // divides to a quiet one, and a NaN makes the row's normalizer and every output value the one
  // quiet NaN and is never a candidate (SPEC §3), so no output bit depends on which NaN it is. So
  // an f32 row at T = 1 is plain: read in place, by the scan and by the large-K cut alike.
  RowSource(const RaggedBatch& batch, const RowTask& task)
      : row(batch.row_bytes(task.logit_row)),
        dtype(batch.dtype),
        row_below(reinterpret_cast<std::uintptr_t>(row) + batch.row_stride * dtype_bytes(batch.dtype)) {
    if (batch.has_temperatures() && (*batch.temperatures)[task.batch_item] != 1.0f)
      temperature = (*batch.temperatures)[task.batch_item];
  }

  // The entries needing no transform (f32 without a temperature) are read in place.
  bool plain() const { return dtype == LogitsDtype::f32 && !temperature; }
  const float* plain_row() const { return reinterpret_cast<const float*>(row); }
  const std::byte* entry(std::uint64_t j) const { return row + j * dtype_bytes(dtype); }

  float at(std::uint64_t j) const {
    float x;
    if (dtype == LogitsDtype::f32) {
      std::memcpy(&x, entry(j), sizeof x);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, entry(j), sizeof bits);
      x = dtype == LogitsDtype::bf16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
    return temperature ? x / *temperature : x;
  }
  // The same x as at(), with one branch on the dtype per call and loops the compiler vectorizes
  // (an IEEE division by lanes is the same division): the speculation sample reads 2000 entries a
  // row through here, and reading them by at() cost a fifth of a K = 255 pass with temperatures.
  void read(std::uint64_t begin, std::uint64_t n, float* out) const {
    switch (dtype) {
      case LogitsDtype::f32:
        std::memcpy(out, entry(begin), n * sizeof(float));
        break;
      case LogitsDtype::bf16:
        for (std::uint64_t i = 0; i < n; ++i) {
          std::uint16_t bits;
          std::memcpy(&bits, entry(begin + i), sizeof bits);
          out[i] = std::bit_cast<float>(std::uint32_t{bits} << 16);  // bf16_to_f32, inlined
        }
        break;
      case LogitsDtype::f16:
        for (std::uint64_t i = 0; i < n; ++i) out[i] = at(begin + i);
        return;  // at() divided
    }
    if (!temperature) return;
    const float t = *temperature;  // a local: out[] could alias the member, which blocks vectorizing
    for (std::uint64_t i = 0; i < n; ++i) out[i] /= t;
  }
};

}  // namespace logprobs::cpu
