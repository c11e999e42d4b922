// logprobs-cuda-bench: times the CUDA kernels through the device API (data already on the GPU,
// as a server calls them), beside the device's own copy bandwidth measured in the same run.
//
//   logprobs-cuda-bench --probe     device and kernel availability; exit 0, or 3 with the reason
//   logprobs-cuda-bench [--json FILE] [--quick] [--k LIST | --levels LIST] [--dtype LIST]
//
// LIST is comma-separated: --k 0,20,4095; --levels 0,8,16 (K = 2^L - 1); --dtype f32,bf16,f16.
// Defaults: levels 0, 1, 3, 5, 8, 10, 12, 16 (--quick: 0 and 8), dtype f32. Each shape is a decode
// step: B = rows, one logit row and one output row per item, N(0, 2) logits, generated once per
// shape and dtype and timed at every K. Calls rotate over enough copies of the batch to exceed
// the L2 cache (256 MiB at least), so every call reads its logits from HBM, as a server's fresh
// logits are.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "batch_view.hpp"
#include "logprobs/batch.hpp"
#include "logprobs_cuda.hpp"

namespace {

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
  logprobs::LogitsDtype dtype;
  std::uint32_t k;
  double us;
  double read_bytes_per_s;
};

// One shape's batch on the device in one dtype, in enough copies to exceed L2, reused at every K.
class DeviceShape {
 public:
  DeviceShape(std::uint64_t rows, std::uint64_t vocab, logprobs::LogitsDtype dtype, const std::vector<float>& x)
      : rows_(rows), vocab_(vocab), dtype_(dtype) {
    const std::size_t bytes = rows * vocab * logprobs::dtype_bytes(dtype);
    copies_ = std::max<std::size_t>(1, (std::size_t(256) << 20) / bytes + 1);
    std::vector<std::byte> host(bytes);
    if (dtype == logprobs::LogitsDtype::f32) {
      std::memcpy(host.data(), x.data(), bytes);
    } else {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const std::uint16_t bits = to_16_bits(x[i], dtype);
        std::memcpy(host.data() + 2 * i, &bits, 2);
      }
    }
    CHECK(cudaMalloc(&logits_, copies_ * bytes));
    for (std::size_t c = 0; c < copies_; ++c)
      CHECK(cudaMemcpy(logits_ + c * bytes, host.data(), bytes, cudaMemcpyHostToDevice));
    std::vector<std::uint32_t> offsets(rows + 1), sampled(rows), zeros(rows + 1, 0);
    std::mt19937 rng(7);
    for (std::uint64_t i = 0; i <= rows; ++i) offsets[i] = std::uint32_t(i);
    for (std::uint64_t i = 0; i < rows; ++i) sampled[i] = std::uint32_t(rng() % vocab);
    offsets_ = upload(offsets);
    sampled_ = upload(sampled);
    no_tokens_ = upload(zeros);  // token_row_offsets: no echo tokens
    batch_bytes_ = bytes;
  }
  ~DeviceShape() {
    for (void* p : {static_cast<void*>(logits_), static_cast<void*>(offsets_), static_cast<void*>(sampled_),
                    static_cast<void*>(no_tokens_)})
      cudaFree(p);
  }
  DeviceShape(const DeviceShape&) = delete;
  DeviceShape& operator=(const DeviceShape&) = delete;

  std::size_t copies() const { return copies_; }
  std::size_t batch_bytes() const { return batch_bytes_; }
  logprobs::DeviceBatch batch(std::size_t copy) const {
    logprobs::DeviceBatch b;
    b.logits = logits_ + copy % copies_ * batch_bytes_;
    b.dtype = logprobs::device_dtype(dtype_);
    b.rows = rows_;
    b.vocab = vocab_;
    b.row_stride = vocab_;
    b.tokens = no_tokens_;  // never read: no echo rows
    b.sampled_tokens = sampled_;
    b.logit_row_offsets = offsets_;
    b.token_row_offsets = no_tokens_;
    b.lp_output_offsets = offsets_;
    b.batch_size = rows_;
    b.output_rows = rows_;
    return b;
  }

 private:
  // Round to nearest even; the benchmark's values are finite and in range.
  static std::uint16_t to_16_bits(float x, logprobs::LogitsDtype dtype) {
    if (dtype == logprobs::LogitsDtype::bf16) {
      std::uint32_t bits;
      std::memcpy(&bits, &x, 4);
      return std::uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
    }
    return std::uint16_t(std::bit_cast<std::uint16_t>(static_cast<_Float16>(x)));
  }
  static std::uint32_t* upload(const std::vector<std::uint32_t>& v) {
    std::uint32_t* d = nullptr;
    CHECK(cudaMalloc(&d, v.size() * 4));
    CHECK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
  }

  std::uint64_t rows_, vocab_;
  logprobs::LogitsDtype dtype_;
  std::size_t copies_ = 1, batch_bytes_ = 0;
  std::byte* logits_ = nullptr;
  std::uint32_t *offsets_ = nullptr, *sampled_ = nullptr, *no_tokens_ = nullptr;
};

Result time_k(const DeviceShape& shape, std::uint64_t rows, std::uint64_t vocab, logprobs::LogitsDtype dtype,
              std::uint32_t k) {
  const std::uint64_t width = std::uint64_t(k) + 1;
  logprobs::DeviceOutput out;
  CHECK(cudaMalloc(&out.lp_logits, rows * width * 4));
  CHECK(cudaMalloc(&out.lp_tokens, rows * width * 4));
  const std::size_t ws_bytes = logprobs::cuda_workspace_bytes(rows, vocab, k);
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, ws_bytes));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < 3; ++i) CHECK(logprobs::cuda_logprobs(shape.batch(i), k, out, workspace, ws_bytes, stream));
  CHECK(cudaStreamSynchronize(stream));

  // Enough calls for about 20 ms, judged from a first timed call.
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaEventRecord(start, stream));
  CHECK(logprobs::cuda_logprobs(shape.batch(0), k, out, workspace, ws_bytes, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float first_ms = 0;
  CHECK(cudaEventElapsedTime(&first_ms, start, stop));
  const int calls = std::clamp(int(20.0 / std::max(first_ms, 1e-3f)), 10, 2000);
  CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < calls; ++i)
    CHECK(logprobs::cuda_logprobs(shape.batch(std::size_t(i)), k, out, workspace, ws_bytes, stream));
  CHECK(cudaEventRecord(stop, stream));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));

  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaStreamDestroy(stream));
  for (void* p : {static_cast<void*>(out.lp_logits), static_cast<void*>(out.lp_tokens), workspace}) CHECK(cudaFree(p));
  const double seconds = double(ms) * 1e-3 / calls;
  return {rows, vocab, dtype, k, seconds * 1e6, double(shape.batch_bytes()) / seconds};
}

// "0,20,4095" -> {0, 20, 4095}; false on anything else.
bool parse_list(std::string_view text, std::vector<std::uint32_t>& out) {
  out.clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string item(text.substr(0, comma));
    char* end = nullptr;
    const unsigned long v = std::strtoul(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v > logprobs::kMaxK) return false;
    out.push_back(std::uint32_t(v));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return !out.empty();
}

bool parse_dtypes(std::string_view text, std::vector<logprobs::LogitsDtype>& out) {
  out.clear();
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (item == "f32")
      out.push_back(logprobs::LogitsDtype::f32);
    else if (item == "bf16")
      out.push_back(logprobs::LogitsDtype::bf16);
    else if (item == "f16")
      out.push_back(logprobs::LogitsDtype::f16);
    else
      return false;
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return !out.empty();
}

// The levels L with K = 2^L - 1, or -1.
int levels_of(std::uint32_t k) { return (k & (k + 1)) == 0 ? std::bit_width(k) : -1; }

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool quick = false;
  std::vector<std::uint32_t> ks, levels;
  std::vector<logprobs::LogitsDtype> dtypes = {logprobs::LogitsDtype::f32};
  const char* usage =
      "usage: logprobs-cuda-bench [--probe] [--quick] [--json FILE] [--k LIST | --levels LIST] [--dtype LIST]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--probe") return probe();
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--json" && has_value) {
      json_path = argv[++i];
    } else if (arg == "--k" && has_value && parse_list(argv[++i], ks)) {
    } else if (arg == "--levels" && has_value && parse_list(argv[++i], levels)) {
      for (std::uint32_t l : levels) {
        if (l > std::uint32_t(logprobs::kMaxLevels)) return std::fprintf(stderr, "%s", usage), 2;
        ks.push_back(logprobs::top_k(int(l)));
      }
    } else if (arg == "--dtype" && has_value && parse_dtypes(argv[++i], dtypes)) {
    } else {
      std::fprintf(stderr, "%s", usage);
      return 2;
    }
  }
  if (ks.empty())
    for (int l : quick ? std::vector<int>{0, 8} : std::vector<int>{0, 1, 3, 5, 8, 10, 12, 16})
      ks.push_back(logprobs::top_k(l));
  if (const int status = probe(); status != 0) return status;

  const double copy_bw = copy_bandwidth();
  std::printf("device-to-device copy: %.0f GB/s (bytes read + written)\n", copy_bw / 1e9);
  struct Shape {
    std::uint64_t rows, vocab;
  };
  const std::vector<Shape> shapes = quick ? std::vector<Shape>{{1, 128256}, {64, 128256}}
                                          : std::vector<Shape>{{1, 128256},  {8, 128256},  {64, 128256}, {256, 128256},
                                                               {64, 152064}, {64, 262144}, {64, 32000}};
  std::vector<Result> results;
  std::printf("%6s %8s %5s %6s %10s %10s %12s\n", "rows", "vocab", "dtype", "k", "us/call", "read GB/s", "of copy bw");
  for (const Shape& s : shapes) {
    std::vector<float> x(s.rows * s.vocab);
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& f : x) f = normal(rng);
    for (const logprobs::LogitsDtype dtype : dtypes) {
      const DeviceShape shape(s.rows, s.vocab, dtype, x);
      for (const std::uint32_t k : ks) {
        const Result r = time_k(shape, s.rows, s.vocab, dtype, k);
        results.push_back(r);
        std::printf("%6llu %8llu %5s %6u %10.2f %10.0f %11.1f%%\n", (unsigned long long)r.rows,
                    (unsigned long long)r.vocab, std::string(logprobs::dtype_name(dtype)).c_str(), r.k, r.us,
                    r.read_bytes_per_s / 1e9, 100 * r.read_bytes_per_s / copy_bw);
        std::fflush(stdout);
      }
    }
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"copy_bytes_per_second\": " << copy_bw << ", \"results\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out << "  {\"rows\": " << r.rows << ", \"vocab\": " << r.vocab << ", \"dtype\": \""
          << logprobs::dtype_name(r.dtype) << "\", \"k\": " << r.k;
      if (levels_of(r.k) >= 0) out << ", \"levels\": " << levels_of(r.k);
      out << ", \"us\": " << r.us << ", \"read_bytes_per_second\": " << r.read_bytes_per_s << "}"
          << (i + 1 < results.size() ? ",\n" : "\n");
    }
    out << "]}\n";
  }
  return 0;
}
