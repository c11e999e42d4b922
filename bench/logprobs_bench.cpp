// logprobs-bench: every available backend (and the libtorch peer when built) over shapes, K,
// logits dtypes, value distributions and thread counts, beside a streaming-read anchor.
//
//   logprobs-bench [--set=ci|full|cpu|smoke] [--with-reference] [--with-variants] [--verify]
//                  [--temperatures] [--ranks] [Google Benchmark flags]
//
// --temperatures adds series with every batch item at T = 0.7 and --ranks series that ask for
// lp_ranks (SPEC §2.5, §2.9); with both, also the series with both. Each is named by its dimension
// (/temperature:0.7, /ranks:1) and runs right after the plain one of the same target and
// configuration, so that a part's cost is a ratio within one run. A target that lacks a part is
// not timed with it.
//
// Names: <target>/rows:R/vocab:V/k:K/dtype:D/dist:D/threads:T,
// judge/rows:R/vocab:V/k:20/dtype:D/dist:normal/threads:T (what judging one batch costs: the
// reference's result and the comparator's verdict, calibrated tolerance included) and
// stream_read/rows:R/vocab:V/dtype:D/threads:T (a read of the same bytes as that dtype's logits).
// Counters: bytes_per_second (logits read), rows_per_second, and read_bw_fraction: the target's
// logits bytes/s over the stream_read bytes/s of the same size and thread count measured in this
// process (by that benchmark, which runs first for each shape, or at first need when filtered out).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "bench_data.hpp"
#include "bench_sets.hpp"
#include "harness/comparator.hpp"
#include "logprobs/batch.hpp"
#include "stream_read.hpp"
#include "targets.hpp"
#include "verify.hpp"

namespace logprobs::bench {
namespace {

struct Options {
  std::string set = "full";
  bool with_reference = false;
  bool with_variants = false;
  bool verify = false;
  bool temperatures = false;
  bool ranks = false;
  bool min_time_given = false;
};

bool verification_failed = false;

using clock = std::chrono::steady_clock;

void stream_read_bench(benchmark::State& state, std::uint64_t bytes, int threads) {
  stream_read(bytes, threads);  // allocate and warm outside the timed loop
  const auto start = clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(stream_read(bytes, threads));
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  record_read_bandwidth(bytes, threads, static_cast<double>(bytes) * double(state.iterations()) / seconds);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

void target_bench(benchmark::State& state, const std::string& name, const Target& target, Shape shape, std::uint32_t k,
                  bool ranks, int threads, bool verify) {
  const BatchData& batch = batch_for(shape);
  // Google Benchmark calls this several times per benchmark while it sizes the iteration count;
  // the outputs and the untimed warm-up pass (first touch of the outputs, the check) happen once.
  static ResultData out;
  static std::string warmed;
  if (out.rows != batch.rows || out.width != slots_per_row(k) || out.ranks != ranks)
    out = ResultData(batch.rows, slots_per_row(k), ranks);
  if (warmed != name) {
    target.run(batch, k, threads, out);
    warmed = name;
    if (verify) {
      if (const std::string problem = check_outputs(batch, k, out, target.tolerance); !problem.empty()) {
        verification_failed = true;
        state.SkipWithError(problem.c_str());
        return;
      }
    }
  }
  const auto start = clock::now();
  for (auto _ : state) {
    target.run(batch, k, threads, out);
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();

  const std::uint64_t bytes = batch.rows * batch.vocab * dtype_bytes(batch.dtype);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["rows_per_second"] =
      benchmark::Counter(double(batch.rows), benchmark::Counter::kIsIterationInvariantRate);
  const double read_bw = read_bandwidth(bytes, threads);
  state.counters["read_bw_fraction"] = double(bytes) * double(state.iterations()) / seconds / read_bw;
}

// The judge of `verify`, `compare`, the campaign and the Python `judge`: the reference backend's
// result for the batch, then compare_result of a result against it under the default tolerance
// (SPEC §5: calibrated). The result judged is the reference's own, computed once outside the
// timing: it passes, so every row is judged in full, as an honest backend's would be.
void judge_bench(benchmark::State& state, Shape shape, std::uint32_t k, int threads) {
  const BatchData& batch = batch_for(shape);
  const Backend& reference = reference_backend();
  omp_set_num_threads(threads);
  const ResultData judged = run_backend(reference, batch, k);
  const auto start = clock::now();
  for (auto _ : state) {
    const Verdict verdict = compare_result(batch.view(), k, run_backend(reference, batch, k), judged);
    if (!verdict.ok()) {
      state.SkipWithError("the judge failed the reference's own result");
      return;
    }
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  const std::uint64_t bytes = batch.rows * batch.vocab * dtype_bytes(batch.dtype);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
  state.counters["rows_per_second"] =
      benchmark::Counter(double(batch.rows), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["read_bw_fraction"] = double(bytes) * double(state.iterations()) / seconds / read_bandwidth(bytes, threads);
}

std::string lowercase(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string shape_name(std::uint64_t rows, std::uint64_t vocab) {
  return "rows:" + std::to_string(rows) + "/vocab:" + std::to_string(vocab);
}

// The optional parts a benchmark runs with (SPEC §2.5 temperatures, §2.9 ranks).
struct Parts {
  bool temperatures = false;
  bool ranks = false;
};

std::vector<Parts> parts_asked(const Options& options) {
  std::vector<Parts> parts{{}};
  if (options.temperatures) parts.push_back({true, false});
  if (options.ranks) parts.push_back({false, true});
  if (options.temperatures && options.ranks) parts.push_back({true, true});
  return parts;
}

void register_target(const Target& target, const Shape& shape, std::uint32_t k, Parts parts, int threads,
                     const BenchSet& set, const Options& options) {
  // A backend is timed only on what it implements (the max port: f32, K = 2^L - 1, no part).
  const std::vector<float> one_temperature{0.7f};
  RaggedBatch needs;  // what missing_part reads: the dtype, whether there are temperatures
  needs.dtype = shape.dtype;
  if (parts.temperatures) needs.temperatures = std::span<const float>(one_temperature);
  if (!missing_part(target.features, needs, k, parts.ranks).empty()) return;
  const std::string name = target.name + "/" + shape_name(shape.rows, shape.vocab) + "/k:" + std::to_string(k) +
                           "/dtype:" + lowercase(dtype_name(shape.dtype)) +
                           "/dist:" + std::string(distribution_name(shape.dist)) +
                           (parts.temperatures ? "/temperature:0.7" : "") + (parts.ranks ? "/ranks:1" : "") +
                           "/threads:" + std::to_string(threads);
  Shape with_parts = shape;
  with_parts.temperatures = parts.temperatures;
  auto* b = benchmark::RegisterBenchmark(name.c_str(), target_bench, name, std::cref(target), with_parts, k,
                                         parts.ranks, threads, options.verify)
                ->UseRealTime()
                ->Unit(benchmark::kMillisecond);
  // Heap-bound at wide K (the max port at K = 4095 on ascending rows takes seconds a pass): one
  // short measurement is enough there.
  if (k >= 4095 && !options.min_time_given) b->MinTime(std::min(0.1, set.default_min_time));
}

void register_set(const BenchSet& set, const std::vector<Target>& targets, const Options& options) {
  for (const auto& [rows, vocab] : set.shapes) {
    for (LogitsDtype dtype : set.dtypes) {
      const std::string dtype_dim = "/dtype:" + lowercase(dtype_name(dtype));
      const std::uint64_t bytes = rows * vocab * dtype_bytes(dtype);
      for (int threads : set.threads) {
        benchmark::RegisterBenchmark(
            ("stream_read/" + shape_name(rows, vocab) + dtype_dim + "/threads:" + std::to_string(threads)).c_str(),
            stream_read_bench, bytes, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
      // The judge at vLLM's usual K on normal rows: its cost is the reference's and the
      // comparator's, which K and the row's shape change little.
      constexpr std::uint32_t kJudgeK = 20;
      if (std::find(set.ks.begin(), set.ks.end(), kJudgeK) != set.ks.end()) {
        for (int threads : set.threads) {
          benchmark::RegisterBenchmark(("judge/" + shape_name(rows, vocab) + "/k:" + std::to_string(kJudgeK) +
                                        dtype_dim + "/dist:normal/threads:" + std::to_string(threads))
                                           .c_str(),
                                       judge_bench, Shape{rows, vocab, Distribution::normal, dtype}, kJudgeK, threads)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
      for (Distribution dist : set.dists) {
        for (std::uint32_t k : set.ks) {
          for (int threads : set.threads) {
            for (const Target& target : targets)
              for (Parts parts : parts_asked(options))
                register_target(target, Shape{rows, vocab, dist, dtype}, k, parts, threads, set, options);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace logprobs::bench

int main(int argc, char** argv) {
  using namespace logprobs::bench;
  Options options;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--set=")) {
      options.set = std::string(arg.substr(6));
    } else if (arg == "--with-reference") {
      options.with_reference = true;
    } else if (arg == "--with-variants") {
      options.with_variants = true;
    } else if (arg == "--verify") {
      options.verify = true;
    } else if (arg == "--temperatures") {
      options.temperatures = true;
    } else if (arg == "--ranks") {
      options.ranks = true;
    } else {
      if (arg.starts_with("--benchmark_min_time")) options.min_time_given = true;
      rest.push_back(argv[i]);
    }
  }

  const int all_cores = omp_get_num_procs();
  const auto set = bench_set(options.set, all_cores);
  if (!set) {
    std::cerr << "logprobs-bench: unknown --set=" << options.set << " (want ci, full, cpu or smoke)\n";
    return 2;
  }
  std::string min_time_flag = "--benchmark_min_time=" + std::to_string(set->default_min_time);
  if (!options.min_time_given) rest.push_back(min_time_flag.data());

  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 2;

  const std::vector<Target> targets = all_targets(options.with_reference, options.with_variants);
  register_set(*set, targets, options);
  benchmark::AddCustomContext("logprobs_set", options.set);
  benchmark::AddCustomContext("logprobs_all_cores", std::to_string(all_cores));
  benchmark::AddCustomContext("logprobs_stream_read", kStreamReadLoop);
  std::string names;
  for (const Target& t : targets) names += (names.empty() ? "" : ",") + t.name;
  benchmark::AddCustomContext("logprobs_targets", names);

  const std::size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (ran == 0) {  // a filter that matches nothing would otherwise pass a gate that timed nothing
    std::cerr << "logprobs-bench: no benchmark ran\n";
    return 1;
  }
  if (verification_failed) {
    std::cerr << "logprobs-bench: --verify found wrong outputs (see the errors above)\n";
    return 1;
  }
  return 0;
}
