// The diagnosis (harness/diagnosis.hpp) on planted bugs: a kernel written here computes every row
// from x in double, as the reference does, with one bug planted; on batches of spread, Zipf-like
// and confident rows, mixed, ragged with echo, of bf16 logits and with temperatures, the
// diagnosis names that bug's class and no other, on every failing row. Right results, the
// backends' included, get no diagnosis; a verdict whose violations were dropped is diagnosed the
// same (it reads Verdict::failed_rows).
// Over 400 lines: one planted kernel per class and the shapes each needs, read as one gallery.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "harness/diagnosis.hpp"
#include "harness/half_precision.hpp"
#include "harness/judge.hpp"

namespace logprobs {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::uint32_t kK = 8;

enum class Kind { spread, zipf, confident, sparse };

// One row of logits of that kind: N(0, 2); a log-rank prior with noise; a flat N(0, 2) sea with
// one logit 12 above it; or 5 candidates among -inf (fewer than K: padding).
std::vector<float> row_of(Kind kind, std::uint64_t vocab, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0, 2), noise(0, 0.5f);
  std::vector<float> x(vocab);
  if (kind == Kind::zipf) {
    std::vector<std::uint64_t> rank(vocab);
    std::iota(rank.begin(), rank.end(), 1);
    std::shuffle(rank.begin(), rank.end(), rng);
    for (std::uint64_t j = 0; j < vocab; ++j) x[j] = -1.1f * std::log(float(rank[j])) + noise(rng);
    return x;
  }
  for (float& v : x) v = normal(rng);
  if (kind == Kind::confident) x[rng() % vocab] = 12;
  if (kind == Kind::sparse) {
    std::fill(x.begin(), x.end(), -kInf);
    for (int i = 0; i < 5; ++i) x[rng() % vocab] = normal(rng);
  }
  return x;
}

struct Shape {
  std::vector<Kind> rows;  // one batch item per entry (with echo: `echo` rows each)
  std::uint64_t vocab = 4096;
  std::uint32_t echo = 1;  // output rows per item (each with its token)
  std::uint32_t extra_logit_rows = 0;  // logit rows before each item's output rows (a prompt)
  bool temperatures = false;
  LogitsDtype dtype = LogitsDtype::f32;
  std::uint64_t seed = 1;
  std::string name;
};

BatchData batch_of(const Shape& shape) {
  std::mt19937_64 rng(shape.seed);
  BatchData b;
  b.vocab = b.row_stride = shape.vocab;
  b.logit_row_offsets = b.token_row_offsets = b.lp_output_offsets = {0};
  const std::uint32_t logit_rows = shape.echo + shape.extra_logit_rows;
  for (const Kind kind : shape.rows) {
    for (std::uint32_t r = 0; r < logit_rows; ++r) {
      const std::vector<float> x = row_of(kind, shape.vocab, rng);
      b.logits.insert(b.logits.end(), x.begin(), x.end());
    }
    for (std::uint32_t t = 0; t + 1 < logit_rows; ++t) b.tokens.push_back(std::uint32_t(rng() % shape.vocab));
    // The item's last row evaluates a candidate of its own row (a masked one for sparse rows).
    const float* last = b.logits.data() + b.logits.size() - shape.vocab;
    std::uint32_t s = std::uint32_t(rng() % shape.vocab);
    if (kind != Kind::sparse)
      while (!(last[s] > -kInf)) s = std::uint32_t(rng() % shape.vocab);
    b.sampled_tokens.push_back(s);
    b.logit_row_offsets.push_back(b.logit_row_offsets.back() + logit_rows);
    b.token_row_offsets.push_back(std::uint32_t(b.tokens.size()));
    b.lp_output_offsets.push_back(b.lp_output_offsets.back() + shape.echo);
  }
  b.rows = b.logit_row_offsets.back();
  if (shape.temperatures) {
    b.temperatures.emplace();
    const float t[] = {0.6f, 1.4f, 0.8f, 2.0f};
    for (std::size_t i = 0; i < shape.rows.size(); ++i) b.temperatures->push_back(t[i % 4]);
  }
  return shape.dtype == LogitsDtype::f32 ? b : with_dtype(b, shape.dtype);
}

// A kernel that computes each row in double, as the reference does, with the planted bugs.
struct Plant {
  double shift = 0;                    // added to every normalizer
  double extra_mass = 0;               // entries of logit 0 added to S
  std::uint32_t top_n = 0;             // S over the N largest entries only
  std::uint32_t prefix = 0;            // S over the first entries only (a truncated row)
  std::optional<LogitsDtype> rounded = {};  // values rounded to that format
  bool temperature_ignored = false, temperature_multiplied = false;
  std::optional<float> clamp = {};     // values below it, -inf included, reported as it
  bool nan_skipped = false;            // NaN and +inf read as -inf
  int token_position = 0;              // the evaluated token taken this many positions away
  int logit_row = 0;                   // each row read this many logit rows away (within its item)
  int token_id = 0;                    // top tokens reported this much off
  bool topk_skips_first = false;       // the K largest after the first
  bool masked_as_candidates = false;   // -inf entries fill the slots that should be padding
  bool ranks_strict = false;           // ranks count x_j > x_s
};

ResultData planted(const BatchData& batch, std::uint32_t k, bool ranks, const Plant& p) {
  const RaggedBatch view = batch.view();
  RaggedBatch raw = view;
  raw.temperatures.reset();
  ResultData out(view.output_rows(), slots_per_row(k), ranks);
  for (RowTask task : plan_rows(view)) {
    const std::uint32_t b = task.batch_item;
    if (p.logit_row != 0) {
      const auto first = std::int64_t(view.logit_row_offsets[b]), end = std::int64_t(view.logit_row_offsets[b + 1]);
      task.logit_row = std::uint64_t(std::clamp(std::int64_t(task.logit_row) + p.logit_row, first, end - 1));
    }
    if (p.token_position != 0) {
      const std::uint64_t r = view.lp_output_offsets[b + 1] - task.output_row - 1;
      const std::int64_t at = std::int64_t(view.token_row_offsets[b + 1] - r) + p.token_position;
      if (at >= 0 && at < std::int64_t(view.tokens.size())) task.token = view.tokens[std::uint64_t(at)];
    }
    std::vector<float> x(view.vocab);
    const bool raw_read = p.temperature_ignored || p.temperature_multiplied;
    read_row(raw_read ? raw : view, task, x);
    if (p.temperature_multiplied)
      for (float& v : x) v = v * (*view.temperatures)[b];
    if (p.nan_skipped)
      for (float& v : x)
        if (std::isnan(v) || v == kInf) v = -kInf;
    double m = -std::numeric_limits<double>::infinity();
    for (const float v : x)
      if (std::isfinite(v) || std::isnan(v)) m = std::isnan(v) ? v : std::max(m, double(v));
    std::vector<double> e;
    for (const float v : x) e.push_back(std::exp(double(v) - m));
    double sum = std::accumulate(e.begin(), e.begin() + (p.prefix > 0 ? p.prefix : e.size()), 0.0);
    if (p.top_n > 0) {
      std::sort(e.begin(), e.end(), std::greater<>());
      sum = std::accumulate(e.begin(), e.begin() + std::min<std::size_t>(p.top_n, e.size()), 0.0);
    }
    sum += p.extra_mass * std::exp(-m);
    const double n = -(m + std::log(sum)) + p.shift;
    const auto value = [&](float xj) {
      float v = static_cast<float>(double(xj) + n);
      if (p.rounded) v = round_to(*p.rounded, v);
      if (p.clamp && !(v >= *p.clamp) && !std::isnan(v)) v = *p.clamp;
      return v;
    };
    std::vector<std::uint32_t> order(view.vocab);
    std::iota(order.begin(), order.end(), 0u);
    const auto before = [&](std::uint32_t a, std::uint32_t c) {
      const float xa = std::isnan(x[a]) ? -kInf : x[a], xc = std::isnan(x[c]) ? -kInf : x[c];
      return xa > xc || (xa == xc && a < c);
    };
    std::sort(order.begin(), order.end(), before);
    const std::size_t skip = p.topk_skips_first ? 1 : 0;
    for (std::uint32_t slot = 0; slot < k; ++slot) {
      const std::size_t at = slot + skip;
      const bool candidate = at < order.size() && (x[order[at]] > -kInf || p.masked_as_candidates);
      const std::uint32_t t = candidate ? order[at] : std::uint32_t(view.vocab);
      out.lp_tokens[task.output_row * out.width + slot] = candidate ? std::uint32_t(std::int64_t(t) + p.token_id) : t;
      out.lp_logits[task.output_row * out.width + slot] = value(candidate ? x[t] : -kInf);
    }
    out.lp_tokens[task.output_row * out.width + k] = task.token;
    out.lp_logits[task.output_row * out.width + k] = value(x[task.token]);
    if (ranks) {
      const float xs = x[task.token];
      out.lp_ranks[task.output_row] = static_cast<std::uint32_t>(
          std::count_if(x.begin(), x.end(), [&](float v) { return p.ranks_strict ? v > xs : v >= xs; }));
    }
  }
  return out;
}

struct Judged {
  Verdict verdict;
  std::vector<Diagnosis> diagnoses;
};

Judged judged(const BatchData& batch, const ResultData& got, std::uint32_t k = kK) {
  Judged j{judge_against_reference(batch, k, got), {}};
  j.diagnoses = diagnose(batch.view(), k, got, j.verdict);
  return j;
}

std::string describe(const Judged& j) {
  std::string text = std::to_string(j.verdict.failed_rows.size()) + " failing rows;";
  for (const Diagnosis& d : j.diagnoses) text += "\n  " + d.message();
  if (!j.verdict.violations.empty()) text += "\n  first violation: " + j.verdict.violations.front().message();
  return text;
}

// The one diagnosis, of class `bug`, covers every failing row; its evidence contains `evidence`.
// Each check prints a "gallery:" line (the class, the batch, what was named) for the docs' table.
std::string shape_shown;  // the batch's name for the gallery line, when a loop over shapes sets it

void expect_named(const Judged& j, BugClass bug, const std::string& evidence = "") {
  std::string names;
  for (const Diagnosis& d : j.diagnoses) names += std::string(names.empty() ? "" : ",") + d.name();
  const auto* test = testing::UnitTest::GetInstance()->current_test_info();
  std::printf("gallery: %s | %s %s | %s | %s\n", bug_class_name(bug), test->name(), shape_shown.c_str(),
              names.empty() ? "-" : names.c_str(),
              j.diagnoses.empty() ? "" : j.diagnoses.front().message().c_str());
  ASSERT_FALSE(j.verdict.ok()) << "the planted bug passes";
  ASSERT_EQ(j.diagnoses.size(), 1u) << describe(j);
  const Diagnosis& d = j.diagnoses.front();
  EXPECT_EQ(d.bug, bug) << describe(j);
  std::vector<std::uint64_t> failing;
  for (const FailedRow& row : j.verdict.failed_rows) failing.push_back(row.output_row);
  EXPECT_EQ(d.rows, failing) << describe(j);
  EXPECT_NE(d.evidence.find(evidence), std::string::npos) << describe(j);
  EXPECT_EQ(d.evidence.rfind(rows_text(d.rows) + ":", 0), 0u) << d.evidence;
}

const std::vector<Shape>& value_shapes() {
  static const std::vector<Shape> shapes = {
      {{Kind::spread, Kind::spread, Kind::spread, Kind::spread}, 4096, 1, 0, false, LogitsDtype::f32, 1, "spread"},
      {{Kind::zipf, Kind::zipf, Kind::zipf, Kind::zipf}, 4096, 1, 0, false, LogitsDtype::f32, 2, "zipf"},
      {{Kind::confident, Kind::confident, Kind::confident}, 4096, 1, 0, false, LogitsDtype::f32, 3, "confident"},
      {{Kind::spread, Kind::zipf, Kind::confident}, 4096, 1, 0, false, LogitsDtype::f32, 4, "mixed"},
      {{Kind::spread, Kind::zipf}, 4096, 3, 0, false, LogitsDtype::f32, 5, "echo"},
      {{Kind::spread, Kind::zipf, Kind::confident}, 4096, 1, 0, false, LogitsDtype::bf16, 6, "bf16"},
      {{Kind::spread, Kind::zipf, Kind::confident}, 4096, 1, 0, true, LogitsDtype::f32, 7, "temperatures"},
  };
  return shapes;
}

void expect_named_on_every_shape(const Plant& plant, BugClass bug, const std::string& evidence = "",
                                 bool ranks = false) {
  for (const Shape& shape : value_shapes()) {
    SCOPED_TRACE(shape.name);
    shape_shown = shape.name;
    const BatchData batch = batch_of(shape);
    expect_named(judged(batch, planted(batch, kK, ranks, plant)), bug, evidence);
  }
  shape_shown.clear();
}

TEST(Diagnosis, RightResultsGetNone) {
  for (const Shape& shape : value_shapes()) {
    SCOPED_TRACE(shape.name);
    const BatchData batch = batch_of(shape);
    for (const Backend* backend : all_backends()) {
      if (!backend->availability().available || !missing_part(backend->features(), batch.view(), kK, false).empty())
        continue;
      const BackendOutcome outcome =
          judge_backend(*backend, batch, kK, false, run_backend(reference_backend(), batch, kK), {});
      EXPECT_TRUE(outcome.ok()) << backend->name();
      EXPECT_TRUE(outcome.diagnoses.empty()) << backend->name();
    }
    const Judged plain = judged(batch, planted(batch, kK, false, {}));
    EXPECT_TRUE(plain.verdict.ok() && plain.diagnoses.empty()) << describe(plain);
  }
}

TEST(Diagnosis, NormalizerShift) {
  expect_named_on_every_shape({.shift = 3e-4}, BugClass::normalizer_shift, "0.0003 above the reference, by one amount");
}

TEST(Diagnosis, NormalizerExtraMassNamesTheMass) {
  for (const Shape& shape : value_shapes()) {
    if (shape.name == "confident") continue;  // below: 64 entries of logit 0 are lost beside e^12
    SCOPED_TRACE(shape.name);
    shape_shown = shape.name;
    const BatchData batch = batch_of(shape);
    expect_named(judged(batch, planted(batch, kK, false, {.extra_mass = 64})), BugClass::normalizer_extra_mass,
                 "as if about 64 more entries of logit 0");
  }
  Shape confident = value_shapes()[2];
  confident.vocab = 512;
  shape_shown = "confident V=512";
  const BatchData batch = batch_of(confident);
  expect_named(judged(batch, planted(batch, kK, false, {.extra_mass = 2048})), BugClass::normalizer_extra_mass,
               "about 2048 more entries");
  shape_shown.clear();
}

TEST(Diagnosis, NormalizerMissingMassNamesN) {
  expect_named_on_every_shape({.top_n = 256}, BugClass::normalizer_missing_mass, "N = 256 largest entries");
}

TEST(Diagnosis, NormalizerMissingMassNamesATruncatedRow) {
  expect_named_on_every_shape({.prefix = 3000}, BugClass::normalizer_missing_mass, "first 3000 of 4096 entries");
}

TEST(Diagnosis, ValuesRounded) {
  expect_named_on_every_shape({.rounded = LogitsDtype::bf16}, BugClass::values_rounded_bf16, "within half a bf16 ulp");
  expect_named_on_every_shape({.rounded = LogitsDtype::f16}, BugClass::values_rounded_f16, "within half a f16 ulp");
}

TEST(Diagnosis, Temperature) {
  Shape shape = value_shapes().back();
  for (const LogitsDtype dtype : {LogitsDtype::f32, LogitsDtype::bf16}) {
    shape.dtype = dtype;
    shape_shown = std::string("mixed with temperatures ") + (dtype == LogitsDtype::f32 ? "f32" : "bf16");
    const BatchData batch = batch_of(shape);
    expect_named(judged(batch, planted(batch, kK, false, {.temperature_ignored = true})),
                 BugClass::temperature_not_applied, "at T = 1");
    expect_named(judged(batch, planted(batch, kK, false, {.temperature_multiplied = true})),
                 BugClass::temperature_inverted, "x * T");
    // K = 0: one value per row, which any normalizer shift would fit too.
    expect_named(judged(batch, planted(batch, 0, false, {.temperature_ignored = true}), 0),
                 BugClass::temperature_not_applied);
  }
  shape_shown.clear();
}

Shape sparse_shape() {
  return {{Kind::sparse, Kind::spread, Kind::sparse, Kind::sparse}, 4096, 1, 0, false, LogitsDtype::f32, 8, "sparse"};
}

// The classes of one kind of batch (masked rows, a ragged echo, prompts), on f32, bf16 and f16 logits.
const LogitsDtype kDtypes[] = {LogitsDtype::f32, LogitsDtype::bf16, LogitsDtype::f16};
const char* dtype_label(LogitsDtype dtype) {
  return dtype == LogitsDtype::f32 ? "f32" : dtype == LogitsDtype::bf16 ? "bf16" : "f16";
}

TEST(Diagnosis, NegInfClamped) {
  for (const LogitsDtype dtype : kDtypes) {
    Shape shape = sparse_shape();
    shape.dtype = dtype;
    shape_shown = std::string("sparse ") + dtype_label(dtype);
    const BatchData batch = batch_of(shape);
    expect_named(judged(batch, planted(batch, kK, false, {.clamp = -9999.0f})), BugClass::neg_inf_clamped,
                 "reported as -9999");
  }
  shape_shown.clear();
}

TEST(Diagnosis, NanNotPropagated) {
  for (const std::size_t at : {std::size_t{3}, std::size_t{0}, std::size_t{6}}) {  // mixed, spread, temperatures
    const Shape& shape = value_shapes()[at];
    shape_shown = shape.name;
    BatchData batch = batch_of(shape);
    batch.logits[5] = std::numeric_limits<float>::quiet_NaN();  // row 0
    batch.logits[2 * batch.vocab + 9] = kInf;                   // row 2
    expect_named(judged(batch, planted(batch, kK, false, {.nan_skipped = true})), BugClass::nan_not_propagated,
                 "a NaN (1 row) or a +inf (1 row)");
  }
  shape_shown.clear();
}

TEST(Diagnosis, EvaluatedTokenMisaligned) {
  for (const LogitsDtype dtype : kDtypes) {
    Shape echo = value_shapes()[4];
    echo.echo = 4;
    echo.dtype = dtype;
    shape_shown = std::string("echo ") + dtype_label(dtype);
    const BatchData batch = batch_of(echo);
    expect_named(judged(batch, planted(batch, kK, true, {.token_position = -1})),
                 BugClass::evaluated_token_misaligned, "one position before");
    expect_named(judged(batch, planted(batch, 0, true, {.token_position = -1}), 0),
                 BugClass::evaluated_token_misaligned);
  }
  shape_shown.clear();
}

TEST(Diagnosis, RowsPermuted) {
  for (const LogitsDtype dtype : kDtypes) {
    Shape prompt = value_shapes()[4];
    prompt.extra_logit_rows = 2;  // each item: 2 prompt rows, then 3 output rows
    prompt.dtype = dtype;
    shape_shown = std::string("echo with prompts ") + dtype_label(dtype);
    const BatchData batch = batch_of(prompt);
    for (const std::uint32_t k : {kK, 0u}) {
      SCOPED_TRACE(k);
      expect_named(judged(batch, planted(batch, k, false, {.logit_row = -2}), k), BugClass::rows_permuted,
                   "every one -2 rows off");
    }
  }
  shape_shown.clear();
}

TEST(Diagnosis, TokensOffByOne) {
  for (const int offset : {+1, -1}) {
    SCOPED_TRACE(offset);
    expect_named_on_every_shape({.token_id = offset}, BugClass::tokens_off_by_one, offset > 0 ? "one above" : "one below");
  }
}

TEST(Diagnosis, TopkNotExact) {
  expect_named_on_every_shape({.topk_skips_first = true}, BugClass::topk_not_exact, "the true top 8's position 1 is missing");
}

TEST(Diagnosis, PaddingCountWrong) {
  for (const LogitsDtype dtype : kDtypes) {
    Shape shape = sparse_shape();
    shape.dtype = dtype;
    shape_shown = std::string("sparse ") + dtype_label(dtype);
    const BatchData batch = batch_of(shape);
    expect_named(judged(batch, planted(batch, kK, false, {.masked_as_candidates = true})),
                 BugClass::padding_count_wrong, "0 padding slots where SPEC §2.7 asks 3");
  }
  shape_shown.clear();
}

TEST(Diagnosis, RankStrict) {
  expect_named_on_every_shape({.ranks_strict = true}, BugClass::rank_strict, "counts the x_j > x_s", true);
}

// Issue 22's specificity at real vocabularies. On rows alike (one shape, V = 32000 or 128256) an
// offset and a mass fit alike: a +2e-5 offset is normalizer_shift (not a missing mass of an N
// near V), 64 padding entries of logit 0 counted in S are normalizer_extra_mass (not an offset),
// a normalizer over the top 1024 is normalizer_missing_mass; on a mixed batch each is named by its
// own fingerprint, a -2e-5 offset included (which, on rows alike, reads as a mass).
TEST(Diagnosis, NormalizerClassesOnRowsAlikeAtRealVocabularies) {
  for (const std::uint64_t vocab : {std::uint64_t{32000}, std::uint64_t{128256}}) {
    for (const Kind kind : {Kind::spread, Kind::zipf}) {
      const std::string name = std::string(kind == Kind::spread ? "spread" : "zipf") + " V=" + std::to_string(vocab);
      SCOPED_TRACE(name);
      shape_shown = name;
      const BatchData batch = batch_of({{kind, kind, kind}, vocab, 1, 0, false, LogitsDtype::f32, 11, name});
      expect_named(judged(batch, planted(batch, kK, false, {.shift = 2e-5})), BugClass::normalizer_shift,
                   "above the reference, by one amount");
      expect_named(judged(batch, planted(batch, kK, false, {.extra_mass = 64})), BugClass::normalizer_extra_mass,
                   "about 64 more entries of logit 0");
      expect_named(judged(batch, planted(batch, kK, false, {.top_n = 1024})), BugClass::normalizer_missing_mass,
                   "N = 1024");
    }
  }
  shape_shown = "mixed V=128256";
  const BatchData mixed = batch_of(
      {{Kind::spread, Kind::zipf, Kind::confident, Kind::spread}, 128256, 1, 0, false, LogitsDtype::f32, 12, "mixed"});
  expect_named(judged(mixed, planted(mixed, kK, false, {.shift = -2e-5})), BugClass::normalizer_shift,
               "below the reference, by one amount on every row");
  expect_named(judged(mixed, planted(mixed, kK, false, {.shift = 2e-5})), BugClass::normalizer_shift);
  expect_named(judged(mixed, planted(mixed, kK, false, {.extra_mass = 64})), BugClass::normalizer_extra_mass,
               "about 64 more entries of logit 0");
  expect_named(judged(mixed, planted(mixed, kK, false, {.top_n = 1024})), BugClass::normalizer_missing_mass,
               "N = 1024");
  shape_shown.clear();
}

TEST(Diagnosis, TwoBugsOnDifferentRulesAreBothNamed) {
  const BatchData batch = batch_of(value_shapes()[0]);
  const Judged j = judged(batch, planted(batch, kK, true, {.rounded = LogitsDtype::bf16, .ranks_strict = true}));
  ASSERT_EQ(j.diagnoses.size(), 2u) << describe(j);
  EXPECT_EQ(j.diagnoses[0].bug, BugClass::values_rounded_bf16);
  EXPECT_EQ(j.diagnoses[1].bug, BugClass::rank_strict);
}

TEST(Diagnosis, ReadsTheFailedRowsNotTheViolations) {
  const BatchData batch = batch_of(value_shapes()[3]);
  const ResultData got = planted(batch, kK, false, {.extra_mass = 64});
  Judged j = judged(batch, got);
  ASSERT_FALSE(j.diagnoses.empty());
  j.verdict.violations.resize(1);  // as a verdict that keeps only its first violations
  const std::vector<Diagnosis> again = diagnose(batch.view(), kK, got, j.verdict);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].evidence, j.diagnoses[0].evidence);
}

// However many rows fail, the diagnosis reads the first kDiagnosedRows, so what it keeps is
// bounded, and it says so.
TEST(Diagnosis, ReadsAtMostTheFirstDiagnosedRowsAndSaysSo) {
  Shape shape{.rows = std::vector<Kind>(kDiagnosedRows + 100, Kind::spread), .vocab = 64};
  const BatchData batch = batch_of(shape);
  const Judged j = judged(batch, planted(batch, kK, false, {.rounded = LogitsDtype::bf16}));
  ASSERT_EQ(j.verdict.failed_rows.size(), kDiagnosedRows + 100);
  ASSERT_EQ(j.diagnoses.size(), 1u) << describe(j);
  EXPECT_EQ(j.diagnoses[0].bug, BugClass::values_rounded_bf16);
  EXPECT_EQ(j.diagnoses[0].rows.size(), kDiagnosedRows);
  EXPECT_EQ(j.diagnoses[0].rows.back(), kDiagnosedRows - 1);
  EXPECT_NE(j.diagnoses[0].evidence.find(fmt::format("(read on the first {} of the {} failing rows)", kDiagnosedRows,
                                                     kDiagnosedRows + 100)),
            std::string::npos)
      << j.diagnoses[0].evidence;
}

TEST(Diagnosis, AViolationThatFitsNoClassIsLeftUndiagnosed) {
  const BatchData batch = batch_of(value_shapes()[0]);
  ResultData got = planted(batch, kK, false, {});
  got.lp_logits[3] += 0.5f;  // one value of row 0
  got.lp_tokens[got.width + 2] = got.lp_tokens[got.width + 1];  // a duplicate in row 1
  const Judged j = judged(batch, got);
  EXPECT_FALSE(j.verdict.ok());
  EXPECT_TRUE(j.diagnoses.empty()) << describe(j);
}

TEST(Diagnosis, RowsText) {
  const std::vector<std::uint64_t> one = {5}, run = {0, 1, 2, 3}, mixed = {0, 1, 2, 7, 9, 10, 11};
  EXPECT_EQ(rows_text(one), "row 5");
  EXPECT_EQ(rows_text(run), "rows 0-3");
  EXPECT_EQ(rows_text(mixed), "rows 0-2, 7, 9-11");
  std::vector<std::uint64_t> many;
  for (std::uint64_t i = 0; i < 40; i += 2) many.push_back(i);
  EXPECT_EQ(rows_text(many), "rows 0, 2, 4, 6, 8, 10 and 14 more");
}

TEST(Diagnosis, NamesAreStable) {
  const char* names[] = {"normalizer_shift",        "normalizer_extra_mass",      "normalizer_missing_mass",
                         "values_rounded_bf16",     "values_rounded_f16",         "temperature_not_applied",
                         "temperature_inverted",    "neg_inf_clamped",            "nan_not_propagated",
                         "evaluated_token_misaligned", "rows_permuted",           "tokens_off_by_one",
                         "topk_not_exact",          "padding_count_wrong",        "rank_strict"};
  for (int i = 0; i < kBugClassCount; ++i) EXPECT_STREQ(bug_class_name(static_cast<BugClass>(i)), names[i]);
}

}  // namespace
}  // namespace logprobs
