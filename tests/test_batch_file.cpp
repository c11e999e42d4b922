// Batch and result files (SPEC §7): round trips, widening, and every kind of malformed file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/batch_file.hpp"
#include "malformed_files.hpp"
#include "temp_dir.hpp"

namespace logprobs {
namespace {

namespace fs = std::filesystem;

using nlohmann::ordered_json;
using testing_support::file_with_header;
using testing_support::malformed_batch_files;
using testing_support::MalformedFile;
using testing_support::temp_dir;
using testing_support::valid_header;
using testing_support::temp_path;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Two batches, the second with two output rows (echo), in rows of stride 5 > V = 3.
BatchData small_batch() {
  BatchData b;
  b.rows = 3;
  b.vocab = 3;
  b.row_stride = 5;
  b.logits = {0.5f, -1.f, 2.f, 99.f, 99.f,  //
              -kInf, 1.f, 1.f, 99.f, 99.f,  //
              kNaN, 0.f, kInf, 99.f, 99.f};
  b.tokens = {2, 1};
  b.sampled_tokens = {0, 2};
  b.logit_row_offsets = {0, 1, 3};
  b.token_row_offsets = {0, 1, 2};
  b.lp_output_offsets = {0, 1, 3};
  return b;
}

void expect_same_batch(const BatchData& want, const BatchData& got) {
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.vocab, want.vocab);
  EXPECT_EQ(got.row_stride, want.vocab);  // compacted on load
  ASSERT_EQ(got.logits.size(), want.rows * want.vocab);
  for (std::uint64_t i = 0; i < want.rows; ++i)
    EXPECT_EQ(std::memcmp(got.logits.data() + i * got.row_stride, want.logits.data() + i * want.row_stride,
                          want.vocab * sizeof(float)),
              0)
        << "row " << i;
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.sampled_tokens, want.sampled_tokens);
  EXPECT_EQ(got.logit_row_offsets, want.logit_row_offsets);
  EXPECT_EQ(got.token_row_offsets, want.token_row_offsets);
  EXPECT_EQ(got.lp_output_offsets, want.lp_output_offsets);
}

TEST(BatchFile, BatchRoundTripKeepsBitsAndLevels) {
  const BatchData batch = small_batch();
  const fs::path path = temp_path("round_trip.safetensors");
  write_batch_file(path, batch, 3, {{"source", "test"}});
  const BatchFile file = read_batch_file(path);
  expect_same_batch(batch, file.batch);
  EXPECT_EQ(file.levels, 3);
  EXPECT_EQ(file.metadata.at("source"), "test");
}

TEST(BatchFile, LevelsAbsentWithoutMetadata) {
  const fs::path path = temp_path("no_levels.safetensors");
  write_batch_file(path, small_batch());
  EXPECT_EQ(read_batch_file(path).levels, std::nullopt);
}

TEST(BatchFile, EmptyBatchRoundTrips) {
  BatchData empty;
  empty.vocab = 7;
  empty.row_stride = 7;
  empty.logit_row_offsets = empty.token_row_offsets = empty.lp_output_offsets = {0};
  const fs::path path = temp_path("empty.safetensors");
  write_batch_file(path, empty, 0);
  const BatchFile file = read_batch_file(path);
  expect_same_batch(empty, file.batch);
}

TEST(BatchFile, ResultRoundTripKeepsBits) {
  ResultData result(2, 4);
  result.lp_logits = {-0.5f, -kInf, kNaN, -1.f, 0.f, -2.f, -3.f, -4.f};
  result.lp_tokens = {1, 7, 7, 0, 3, 2, 1, 0};
  const fs::path path = temp_path("result.safetensors");
  write_result_file(path, result, {{"backend", "max"}, {"levels", "2"}});
  const ResultFile file = read_result_file(path);
  EXPECT_TRUE(same_bits(result, file.result));
  EXPECT_EQ(file.metadata.at("backend"), "max");
  EXPECT_EQ(file.levels, 2);
}

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

// A one-row batch whose logits are given as raw 16-bit values of `dtype`.
void write_half_batch(const fs::path& path, const std::string& dtype, const std::vector<std::uint16_t>& half) {
  const std::vector<std::uint32_t> zero = {0}, offsets = {0, 1}, no_tokens = {0, 0};
  const std::vector<SafetensorsTensor> tensors = {
      {"logits", dtype, {1, half.size()}, bytes_of(half)},    {"tokens", "U32", {0}, {}},
      {"sampled_tokens", "U32", {1}, bytes_of(zero)},         {"logit_row_offsets", "U32", {2}, bytes_of(offsets)},
      {"token_row_offsets", "U32", {2}, bytes_of(no_tokens)}, {"lp_output_offsets", "U32", {2}, bytes_of(offsets)},
  };
  write_safetensors(path, tensors, {});
}

TEST(BatchFile, Bf16LogitsAreWidenedExactly) {
  // 1.0, -2.5, -inf, NaN, the smallest positive bf16 subnormal
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc020, 0xff80, 0x7fc0, 0x0001};
  const fs::path path = temp_path("bf16.safetensors");
  write_half_batch(path, "BF16", bf16);
  const BatchData batch = read_batch_file(path).batch;
  ASSERT_EQ(batch.vocab, 5u);
  EXPECT_EQ(batch.row_stride, 5u);
  EXPECT_EQ(batch.logits[0], 1.0f);
  EXPECT_EQ(batch.logits[1], -2.5f);
  EXPECT_EQ(batch.logits[2], -kInf);
  EXPECT_TRUE(std::isnan(batch.logits[3]));
  EXPECT_EQ(batch.logits[4], std::ldexp(1.0f, -133));
}

TEST(BatchFile, F16LogitsAreWidenedExactly) {
  // 1.0, -2.5, 65504 (largest), -inf, NaN, the smallest positive subnormal 2^-24, -0
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc100, 0x7bff, 0xfc00, 0x7e00, 0x0001, 0x8000};
  const fs::path path = temp_path("f16.safetensors");
  write_half_batch(path, "F16", f16);
  const BatchData batch = read_batch_file(path).batch;
  ASSERT_EQ(batch.vocab, 7u);
  EXPECT_EQ(batch.logits[0], 1.0f);
  EXPECT_EQ(batch.logits[1], -2.5f);
  EXPECT_EQ(batch.logits[2], 65504.0f);
  EXPECT_EQ(batch.logits[3], -kInf);
  EXPECT_TRUE(std::isnan(batch.logits[4]));
  EXPECT_EQ(batch.logits[5], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(batch.logits[6]) && batch.logits[6] == 0.0f);
}

// Malformed files (the table in malformed_files.hpp), each written with raw bytes.

void write_raw(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The error message read_batch_file gives for the file, or "" if it is accepted.
std::string batch_error(const std::string& bytes) {
  static int counter = 0;
  const fs::path path = temp_path("malformed_" + std::to_string(counter++) + ".safetensors");
  write_raw(path, bytes);
  try {
    read_batch_file(path);
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << "the message names the file: " << message;
    return message;
  }
  return "";
}

TEST(BatchFileMalformed, ValidHeaderIsAccepted) { EXPECT_EQ(batch_error(file_with_header(valid_header().dump())), ""); }

TEST(BatchFileMalformed, EachKindIsRejectedWithItsMessage) {
  for (const MalformedFile& file : malformed_batch_files()) {
    const std::string message = batch_error(file.bytes);
    EXPECT_NE(message.find(file.fragment), std::string::npos) << file.name << ": message '" << message << "'";
  }
}

TEST(BatchFileMalformed, MissingFile) {
  EXPECT_THROW(read_batch_file(temp_path("does_not_exist.safetensors")), FileError);
}

TEST(BatchFileMalformed, ResultShapesDisagree) {
  ordered_json h;
  h["lp_logits"] = {{"dtype", "F32"}, {"shape", {1, 2}}, {"data_offsets", {0, 8}}};
  h["lp_tokens"] = {{"dtype", "U32"}, {"shape", {2, 1}}, {"data_offsets", {8, 16}}};
  const fs::path path = temp_path("result_shapes.safetensors");
  write_raw(path, file_with_header(h.dump(), 16));
  try {
    read_result_file(path);
    ADD_FAILURE() << "accepted";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("lp_logits has shape [1, 2] but lp_tokens has shape [2, 1]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace logprobs
