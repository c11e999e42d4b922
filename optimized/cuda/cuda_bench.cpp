// logprobs-cuda-bench: times the CUDA kernels through the device API (data already on the GPU,
// as a server calls them), beside the device's own copy bandwidth measured in the same run.
//
//   logprobs-cuda-bench --probe            device and kernel availability; exit 0, or 3 with the reason
//   logprobs-cuda-bench [--json FILE] [--quick]
//
// Each shape is a decode step: B = rows, one logit row and one output row per item, N(0, 2)
// logits. Calls rotate over enough copies of the batch to exceed the L2 cache (256 MiB at
// least), so every call reads its logits from HBM, as a server's fresh logits are.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "logprobs_cuda.hpp"

namespace {

using logprobs::DeviceBatch;
using logprobs::DeviceOutput;

#define CHECK(call)                                                                           \
  do {                                                                                        \
    const cudaError_t err_ = (call);                                                          \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "logprobs-cuda-bench: %s: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

int probe() {
  int devices = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess) {
    std::printf("no CUDA device: cudaGetDeviceCount: %s\n", cudaGetErrorString(err));
    return 3;
  }
  if (devices == 0) {
    std::printf("no CUDA device: cudaGetDeviceCount found 0\n");
    return 3;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s, compute capability %d.%d, %d SMs, L2 %d MiB, %.1f GiB\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20, double(prop.totalGlobalMem) / (1 << 30));
  if (const cudaError_t err = logprobs::cuda_kernels_loadable(); err != cudaSuccess) {
    std::printf("the kernels cannot run on device 0: %s\n", cudaGetErrorString(err));
    return 3;
  }
  std::printf("kernels loadable\n");
  return 0;
}

// Bytes read plus bytes written per second by a device-to-device copy of 1 GiB.
double copy_bandwidth() {
  const std::size_t bytes = std::size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  const int reps = 10;
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * double(bytes) * reps / (double(ms) * 1e-3);
}

struct Result {
  std::uint64_t rows, vocab;
  int levels;
  double us;
  double read_bytes_per_s;
};

Result time_shape(std::uint64_t rows, std::uint64_t vocab, int levels) {
  const std::size_t batch_floats = rows * vocab;
  const std::size_t copies = std::max<std::size_t>(1, (std::size_t(256) << 20) / (batch_floats * 4) + 1);
  std::vector<float> host(batch_floats);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& f : host) f = normal(rng);

  float* logits = nullptr;
  CHECK(cudaMalloc(&logits, copies * batch_floats * sizeof(float)));
  for (std::size_t c = 0; c < copies; ++c)
    CHECK(cudaMemcpy(logits + c * batch_floats, host.data(), batch_floats * sizeof(float), cudaMemcpyHostToDevice));

  std::vector<std::uint32_t> offsets(rows + 1), sampled(rows);
  for (std::uint64_t i = 0; i <= rows; ++i) offsets[i] = std::uint32_t(i);
  for (std::uint64_t i = 0; i < rows; ++i) sampled[i] = std::uint32_t(rng() % vocab);
  std::uint32_t *d_offsets = nullptr, *d_sampled = nullptr, *d_tokens = nullptr;
  CHECK(cudaMalloc(&d_offsets, offsets.size() * 4));
  CHECK(cudaMalloc(&d_sampled, sampled.size() * 4));
  CHECK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_sampled, sampled.data(), sampled.size() * 4, cudaMemcpyHostToDevice));
  std::vector<std::uint32_t> zeros(rows + 1, 0);
  CHECK(cudaMalloc(&d_tokens, zeros.size() * 4));  // token_row_offsets: no echo tokens
  CHECK(cudaMemcpy(d_tokens, zeros.data(), zeros.size() * 4, cudaMemcpyHostToDevice));

  const std::uint64_t width = levels == 0 ? 1 : (std::uint64_t(1) << levels);
  DeviceOutput out;
  CHECK(cudaMalloc(&out.lp_logits, rows * width * 4));
  CHECK(cudaMalloc(&out.lp_tokens, rows * width * 4));
  const std::size_t ws_bytes = logprobs::cuda_workspace_bytes(rows, vocab, levels);
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, ws_bytes));

  auto batch_at = [&](std::size_t c) {
    DeviceBatch b;
    b.logits = logits + c * batch_floats;
    b.rows = rows;
    b.vocab = vocab;
    b.row_stride = vocab;
    b.tokens = d_tokens;  // never read: no echo rows
    b.sampled_tokens = d_sampled;
    b.logit_row_offsets = d_offsets;
    b.token_row_offsets = d_tokens;
    b.lp_output_offsets = d_offsets;
    b.batch_size = rows;
    b.output_rows = rows;
    return b;
  };
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < 3; ++i) CHECK(logprobs::cuda_logprobs(batch_at(i % copies), levels, out, workspace, ws_bytes, stream));
  CHECK(cudaStreamSynchronize(stream));

  // Enough calls for about 20 ms, judged from a first timed call.
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  CHECK(logprobs::cuda_logprobs(batch_at(0), levels, out, workspace, ws_bytes, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float first_ms = 0;
  CHECK(cudaEventElapsedTime(&first_ms, start, stop));
  const int calls = std::clamp(int(20.0 / std::max(first_ms, 1e-3f)), 10, 2000);
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < calls; ++i)
    CHECK(logprobs::cuda_logprobs(batch_at(std::size_t(i) % copies), levels, out, workspace, ws_bytes, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));

  CHECK(cudaStreamDestroy(stream));
  for (void* p : {static_cast<void*>(logits), static_cast<void*>(d_offsets), static_cast<void*>(d_sampled),
                  static_cast<void*>(d_tokens), static_cast<void*>(out.lp_logits), static_cast<void*>(out.lp_tokens),
                  workspace})
    CHECK(cudaFree(p));
  const double seconds = double(ms) * 1e-3 / calls;
  return {rows, vocab, levels, seconds * 1e6, double(batch_floats) * 4 / seconds};
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--probe") return probe();
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: logprobs-cuda-bench [--probe] [--quick] [--json FILE]\n");
      return 2;
    }
  }
  if (const int status = probe(); status != 0) return status;

  const double copy_bw = copy_bandwidth();
  std::printf("device-to-device copy: %.0f GB/s (bytes read + written)\n", copy_bw / 1e9);
  struct Shape {
    std::uint64_t rows, vocab;
  };
  const std::vector<Shape> shapes = quick ? std::vector<Shape>{{1, 128256}, {64, 128256}}
                                          : std::vector<Shape>{{1, 128256}, {8, 128256}, {64, 128256},
                                                               {256, 128256}, {64, 152064}, {64, 262144},
                                                               {64, 32000}};
  const std::vector<int> levels = quick ? std::vector<int>{0, 8} : std::vector<int>{0, 1, 3, 5, 8, 10, 12, 16};
  std::vector<Result> results;
  std::printf("%6s %8s %6s %10s %10s %12s\n", "rows", "vocab", "levels", "us/call", "read GB/s", "of copy bw");
  for (const Shape& s : shapes) {
    for (int l : levels) {
      const Result r = time_shape(s.rows, s.vocab, l);
      results.push_back(r);
      std::printf("%6llu %8llu %6d %10.2f %10.0f %11.1f%%\n", (unsigned long long)r.rows,
                  (unsigned long long)r.vocab, r.levels, r.us, r.read_bytes_per_s / 1e9,
                  100 * r.read_bytes_per_s / copy_bw);
      std::fflush(stdout);
    }
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"copy_bytes_per_second\": " << copy_bw << ", \"results\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << "  {\"rows\": " << r.rows << ", \"vocab\": " << r.vocab << ", \"levels\": " << r.levels
          << ", \"us\": " << r.us << ", \"read_bytes_per_second\": " << r.read_bytes_per_s << "}"
          << (i + 1 < results.size() ? ",\n" : "\n");
    }
    out << "]}\n";
  }
  return 0;
}
