// The registered backend `cuda`: validates on the host (Backend::run), copies the batch to the
// device, runs cuda_logprobs on a stream of its own and copies the outputs back.
#include <cuda_runtime_api.h>

#include <bit>
#include <stdexcept>
#include <string>
#include <utility>

#include "logprobs/backend.hpp"
#include "logprobs_cuda.hpp"

namespace logprobs {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
}

// One device allocation, freed on every path out (the backend may throw halfway).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

class Stream {
 public:
  Stream() { check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

template <typename T>
DeviceBuffer upload(std::span<const T> host, cudaStream_t stream) {
  DeviceBuffer buffer(host.size_bytes());
  if (!host.empty())
    check(cudaMemcpyAsync(buffer.as<T>(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync to device");
  return buffer;
}

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string_view description() const override {
    return "CUDA: 128-bit loads, CUB block reductions, radix-select top-K, rows split over CTAs by V";
  }

  Availability availability() const override {
    int devices = 0;
    if (const cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess)
      return {false, std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(err)};
    if (devices == 0) return {false, "no CUDA device: cudaGetDeviceCount found 0"};
    if (const cudaError_t err = cuda_kernels_loadable(); err != cudaSuccess)
      return {false, std::string("the kernels cannot run on device 0: ") + cudaGetErrorString(err)};
    return {};
  }

  bool computes_on_host() const override { return false; }
  // Contract v1 so far: f32 logits, K = 2^L - 1, no temperatures or ranks.
  Features features() const override { return {}; }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    if (out.rows == 0) return;
    const int levels = std::bit_width(k);  // K = 2^levels - 1 (features(): no other K)
    const Stream stream;
    // Only the logits the batch reads: rows [0, lro[B]), the last of them up to V.
    const std::uint64_t used_rows = batch.logit_row_offsets.back();
    const std::uint64_t logit_count = used_rows == 0 ? 0 : (used_rows - 1) * batch.row_stride + batch.vocab;
    const DeviceBuffer logits =
        upload(std::span<const float>(static_cast<const float*>(batch.logits), logit_count), stream.get());
    const DeviceBuffer tokens = upload(batch.tokens, stream.get());
    const DeviceBuffer sampled = upload(batch.sampled_tokens, stream.get());
    const DeviceBuffer lro = upload(batch.logit_row_offsets, stream.get());
    const DeviceBuffer tro = upload(batch.token_row_offsets, stream.get());
    const DeviceBuffer loo = upload(batch.lp_output_offsets, stream.get());
    const DeviceBuffer lp_logits(out.lp_logits.size_bytes());
    const DeviceBuffer lp_tokens(out.lp_tokens.size_bytes());
    const std::size_t workspace_bytes = cuda_workspace_bytes(out.rows, batch.vocab, levels);
    const DeviceBuffer workspace(workspace_bytes);

    DeviceBatch device{logits.as<const float>(), used_rows, batch.vocab, batch.row_stride,
                       tokens.as<const std::uint32_t>(), sampled.as<const std::uint32_t>(),
                       lro.as<const std::uint32_t>(), tro.as<const std::uint32_t>(), loo.as<const std::uint32_t>(),
                       batch.batch_size(), out.rows};
    check(cuda_logprobs(device, levels, {lp_logits.as<float>(), lp_tokens.as<std::uint32_t>()}, workspace.as<void>(),
                        workspace_bytes, stream.get()),
          "cuda_logprobs");
    check(cudaMemcpyAsync(out.lp_logits.data(), lp_logits.as<float>(), out.lp_logits.size_bytes(),
                          cudaMemcpyDeviceToHost, stream.get()),
          "cudaMemcpyAsync to host");
    check(cudaMemcpyAsync(out.lp_tokens.data(), lp_tokens.as<std::uint32_t>(), out.lp_tokens.size_bytes(),
                          cudaMemcpyDeviceToHost, stream.get()),
          "cudaMemcpyAsync to host");
    check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace logprobs
