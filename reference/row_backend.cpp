#include "row_backend.hpp"

#include <utility>
#include <vector>

namespace logprobs {
namespace {

class RowBackend final : public Backend {
 public:
  RowBackend(std::string name, std::string description, RowFunction row)
      : name_(std::move(name)), description_(std::move(description)), row_(row) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }

 protected:
  void compute(const RaggedBatch& batch, int levels, const LogprobsOutput& out) const override {
    const std::vector<RowTask> tasks = plan_rows(batch);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::size_t i = 0; i < tasks.size(); ++i) row_(batch, tasks[i], levels, out);
  }

 private:
  std::string name_;
  std::string description_;
  RowFunction row_;
};

}  // namespace

std::unique_ptr<Backend> make_row_backend(std::string name, std::string description, RowFunction row) {
  return std::make_unique<RowBackend>(std::move(name), std::move(description), row);
}

}  // namespace logprobs
