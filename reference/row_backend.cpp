#include "row_backend.hpp"

#include <utility>
#include <vector>

namespace logprobs {
namespace {

class RowBackend final : public Backend {
 public:
  RowBackend(RowBackendInfo info, RowFunction row) : info_(std::move(info)), row_(row) {}
  std::string_view name() const override { return info_.name; }
  std::string_view description() const override { return info_.description; }
  Features features() const override { return info_.features; }
  bool sums_in_one_chain() const override { return info_.sums_in_one_chain; }
  bool claims_canonical_arithmetic() const override { return info_.claims_canonical_arithmetic; }

 protected:
  void compute(const RaggedBatch& batch, std::uint32_t k, const LogprobsOutput& out) const override {
    const std::vector<RowTask> tasks = plan_rows(batch);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t i = 0; i < tasks.size(); ++i) row_(batch, tasks[i], k, out);
  }

 private:
  RowBackendInfo info_;
  RowFunction row_;
};

}  // namespace

std::unique_ptr<Backend> make_row_backend(RowBackendInfo info, RowFunction row) {
  return std::make_unique<RowBackend>(std::move(info), row);
}

}  // namespace logprobs
