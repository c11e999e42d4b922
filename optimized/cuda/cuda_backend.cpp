// The registered backend `cuda`: validates on the host (Backend::run), copies the batch to the
// device, runs cuda_logprobs on a stream of its own and copies the outputs back.
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "batch_view.hpp"
#include "logprobs/backend.hpp"
#include "logprobs_cuda.hpp"

namespace logprobs {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(err));
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

template <typename T>
void download(std::span<T> host, const DeviceBuffer& device, cudaStream_t stream) {
  if (!host.empty())
    check(cudaMemcpyAsync(host.data(), device.as<T>(), host.size_bytes(), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync to host");
}

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string_view description() const override {
    return "CUDA: SPEC §8's canonical arithmetic, one CTA per segment of 1024, top-K by merge tree or row "
           "threshold, merges fused into the pass by last-arrival counters";
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
  Features features() const override { return Features::all(); }
  bool claims_canonical_arithmetic() const override { return true; }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    if (out.rows == 0) return;
    const Stream stream;
    // Only the logits the batch reads: rows [0, lro[B]), the last of them up to V.
    const std::uint64_t used_rows = batch.logit_row_offsets.back();
    const std::uint64_t logit_count = used_rows == 0 ? 0 : (used_rows - 1) * batch.row_stride + batch.vocab;
    const DeviceBuffer logits = upload(
        std::span<const std::byte>(static_cast<const std::byte*>(batch.logits), logit_count * dtype_bytes(batch.dtype)),
        stream.get());
    const DeviceBuffer tokens = upload(batch.tokens, stream.get());
    const DeviceBuffer sampled = upload(batch.sampled_tokens, stream.get());
    const DeviceBuffer lro = upload(batch.logit_row_offsets, stream.get());
    const DeviceBuffer tro = upload(batch.token_row_offsets, stream.get());
    const DeviceBuffer loo = upload(batch.lp_output_offsets, stream.get());
    const DeviceBuffer temperatures = upload(batch.temperatures.value_or(std::span<const float>()), stream.get());
    const DeviceBuffer lp_logits(out.lp_logits.size_bytes());
    const DeviceBuffer lp_tokens(out.lp_tokens.size_bytes());
    const DeviceBuffer lp_ranks(out.ranks ? out.lp_ranks.size_bytes() : 0);
    const std::size_t workspace_bytes = cuda_workspace_bytes(out.rows, batch.vocab, k);
    const DeviceBuffer workspace(workspace_bytes);

    DeviceBatch device = device_batch_of(batch);  // then the device copies' pointers
    device.logits = logits.as<const void>();
    device.rows = used_rows;
    device.tokens = tokens.as<const std::uint32_t>();
    device.sampled_tokens = sampled.as<const std::uint32_t>();
    device.logit_row_offsets = lro.as<const std::uint32_t>();
    device.token_row_offsets = tro.as<const std::uint32_t>();
    device.lp_output_offsets = loo.as<const std::uint32_t>();
    device.temperatures = batch.has_temperatures() ? temperatures.as<const float>() : nullptr;
    device.output_rows = out.rows;
    const DeviceOutput device_out{lp_logits.as<float>(), lp_tokens.as<std::uint32_t>(),
                                  out.ranks ? lp_ranks.as<std::uint32_t>() : nullptr};
    check(cuda_logprobs(device, k, device_out, workspace.as<void>(), workspace_bytes, stream.get()), "cuda_logprobs");
    download(out.lp_logits, lp_logits, stream.get());
    download(out.lp_tokens, lp_tokens, stream.get());
    if (out.ranks) download(out.lp_ranks, lp_ranks, stream.get());
    check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace logprobs
