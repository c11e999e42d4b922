// Batch and result files (SPEC §7): round trips, widening, and every kind of malformed file.
// Over 400 lines: one suite for one file format, each test a few lines on one property of it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/batch_file.hpp"
#include "harness/half_precision.hpp"
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
  ASSERT_EQ(got.dtype, want.dtype);
  ASSERT_EQ(got.logit_bytes().size(), want.rows * want.vocab * dtype_bytes(want.dtype));
  for (std::uint64_t i = 0; i < want.rows; ++i)
    for (std::uint64_t j = 0; j < want.vocab; ++j)
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got.logit(i, j)), std::bit_cast<std::uint32_t>(want.logit(i, j)))
          << "row " << i << ", column " << j;
  EXPECT_EQ(got.temperatures, want.temperatures);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.sampled_tokens, want.sampled_tokens);
  EXPECT_EQ(got.logit_row_offsets, want.logit_row_offsets);
  EXPECT_EQ(got.token_row_offsets, want.token_row_offsets);
  EXPECT_EQ(got.lp_output_offsets, want.lp_output_offsets);
}

TEST(BatchFile, BatchRoundTripKeepsBitsAndK) {
  const BatchData batch = small_batch();
  const fs::path path = temp_path("round_trip.safetensors");
  write_batch_file(path, batch, 20, {{"source", "test"}});
  const BatchFile file = read_batch_file(path);
  expect_same_batch(batch, file.batch);
  EXPECT_EQ(file.k, 20u);
  EXPECT_EQ(file.metadata.at("k"), "20");
  EXPECT_EQ(file.metadata.at("source"), "test");
}

TEST(BatchFile, SixteenBitLogitsAndTemperaturesRoundTripInTheirDtype) {
  for (const LogitsDtype dtype : {LogitsDtype::bf16, LogitsDtype::f16}) {
    BatchData batch = with_dtype(small_batch(), dtype);
    batch.temperatures = std::vector<float>{0.05f, 1.0f};
    const fs::path path = temp_path(std::string("round_trip_") + std::string(dtype_name(dtype)) + ".safetensors");
    write_batch_file(path, batch, 7);
    const BatchFile file = read_batch_file(path);
    EXPECT_EQ(file.batch.dtype, dtype) << "a 16-bit batch stays 16-bit";
    EXPECT_TRUE(file.batch.logits.empty());
    expect_same_batch(batch, file.batch);
  }
}

TEST(BatchFile, KAbsentWithoutMetadata) {
  const fs::path path = temp_path("no_k.safetensors");
  write_batch_file(path, small_batch());
  EXPECT_EQ(read_batch_file(path).k, std::nullopt);
}

// Version-1 files name MAX's levels; "k" and "levels" together must agree. Numbers are plain
// decimal: no sign, no leading zero.
TEST(BatchFile, MetadataKAndLevels) {
  const auto k_of = [](const FileMetadata& metadata) {
    const fs::path path = temp_path("metadata_k.safetensors");
    write_batch_file(path, small_batch(), std::nullopt, metadata);
    return read_batch_file(path).k;
  };
  EXPECT_EQ(k_of({{"levels", "3"}}), 7u);
  EXPECT_EQ(k_of({{"levels", "16"}}), 65535u);
  EXPECT_EQ(k_of({{"k", "0"}}), 0u);
  EXPECT_EQ(k_of({{"k", "255"}, {"levels", "8"}}), 255u);
  const auto refused = [&](const FileMetadata& metadata, const std::string& fragment) {
    try {
      k_of(metadata);
      return ::testing::AssertionFailure() << "accepted";
    } catch (const FileError& e) {
      if (std::string(e.what()).find(fragment) == std::string::npos)
        return ::testing::AssertionFailure() << "message " << e.what();
    }
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused({{"k", "5"}, {"levels", "3"}}, "k = 5 and levels = 3 disagree"));
  EXPECT_TRUE(refused({{"k", "65536"}}, "metadata k = '65536' is not a plain decimal integer in 0..65535"));
  EXPECT_TRUE(refused({{"levels", "17"}}, "metadata levels = '17'"));
  EXPECT_TRUE(refused({{"k", "03"}}, "metadata k = '03'"));
  EXPECT_TRUE(refused({{"k", "-0"}}, "metadata k = '-0'"));
  EXPECT_TRUE(refused({{"k", ""}}, "metadata k = ''"));
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

// The logits are read in place: the batch views the file's mapping, which outlives the reader and
// is shared by copies; own_logits() turns it into an owned copy with the same bits.
TEST(BatchFile, LogitsAreReadInPlaceAndOwnedOnRequest) {
  const fs::path path = temp_path("in_place.safetensors");
  write_batch_file(path, small_batch(), 3);
  BatchData copy;
  {
    const BatchFile file = read_batch_file(path);
    EXPECT_TRUE(file.batch.logits.empty() && file.batch.logits_owner != nullptr);
    copy = file.batch;
  }
  expect_same_batch(small_batch(), copy);
  BatchData owned = copy;
  owned.own_logits();
  EXPECT_EQ(owned.logits_owner, nullptr);
  EXPECT_EQ(owned.logits.size(), 9u);
  expect_same_batch(small_batch(), owned);
  const BatchData fewer = without_item(copy, 0);  // edits a copy that owns its logits
  ASSERT_EQ(fewer.rows, 2u);
  EXPECT_EQ(fewer.logit(0, 1), small_batch().logit(1, 1));
  expect_same_batch(small_batch(), copy);
}

// SPEC §1 allows logits at any alignment, and a file may place them at any offset: read in place
// at an odd one, they read back and judge as the same batch owned.
// An odd offset is valid (SPEC §7), but a float read through it is not: those logits are copied.
TEST(BatchFile, LogitsAtAnOddOffsetAreCopiedAligned) {
  ordered_json h;
  h["logits"] = {{"dtype", "F32"}, {"shape", {1, 3}}, {"data_offsets", {1, 13}}};
  h["tokens"] = {{"dtype", "U32"}, {"shape", {0}}, {"data_offsets", {13, 13}}};
  h["sampled_tokens"] = {{"dtype", "U32"}, {"shape", {1}}, {"data_offsets", {13, 17}}};
  h["logit_row_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {17, 25}}};
  h["token_row_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {25, 33}}};
  h["lp_output_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {33, 41}}};
  const std::string header = h.dump() + std::string((8 - h.dump().size() % 8) % 8, ' ');  // data starts 8-aligned
  const float logits[3] = {0.25f, -3.0f, 1.5f};
  const std::uint32_t u32[7] = {2, 0, 1, 0, 0, 0, 1};  // sampled token; the three offset arrays
  std::string data(41, '\0');
  std::memcpy(data.data() + 1, logits, sizeof logits);
  std::memcpy(data.data() + 13, u32, sizeof u32);
  const fs::path path = temp_path("odd_offset.safetensors");
  std::ofstream(path, std::ios::binary) << testing_support::length_prefix(header.size()) << header << data;

  const BatchFile file = read_batch_file(path);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(file.batch.view().logits) % alignof(float), 0u);
  BatchData owned = single_row_batch(logits, 2);
  expect_same_batch(owned, file.batch);
  EXPECT_TRUE(same_bits(run_backend(reference_backend(), file.batch, 2, true),
                        run_backend(reference_backend(), owned, 2, true)));
}

TEST(BatchFile, ResultRoundTripKeepsBitsAndRanks) {
  for (const bool ranks : {false, true}) {
    ResultData result(2, 4, ranks);
    result.lp_logits = {-0.5f, -kInf, kNaN, -1.f, 0.f, -2.f, -3.f, -4.f};
    result.lp_tokens = {1, 7, 7, 0, 3, 2, 1, 0};
    if (ranks) result.lp_ranks = {4, 1};
    const fs::path path = temp_path("result.safetensors");
    write_result_file(path, result, {{"backend", "max"}, {"levels", "2"}});
    const ResultFile file = read_result_file(path);
    EXPECT_EQ(file.layout, ResultLayout::packed);
    EXPECT_TRUE(same_bits(result, file.packed));
    EXPECT_EQ(file.metadata.at("backend"), "max");
    EXPECT_EQ(file.k, 3u);
  }
}

// The split layout (vLLM's): the evaluated token's id comes from the batch when it is packed.
TEST(BatchFile, SplitResultRoundTripsAndPacksWithTheBatchsTokens) {
  const BatchData batch = small_batch();
  ResultData packed(3, 3, /*ranks=*/true);
  packed.lp_tokens = {2, 0, 0, 1, 2, 1, 2, 3, 2};  // the last slots: the batch's evaluated tokens 0, 1, 2
  packed.lp_logits = {-0.2f, -2.7f, -0.2f, -0.7f, -0.7f, -0.7f, kNaN, kNaN, kNaN};
  packed.lp_ranks = {2, 1, 0};
  const SplitResult split = split_from_packed(packed);
  ASSERT_EQ(split.k, 2u);
  const fs::path path = temp_path("split.safetensors");
  write_split_result_file(path, split, {{"k", "2"}});
  const ResultFile file = read_result_file(path);
  EXPECT_EQ(file.layout, ResultLayout::split);
  EXPECT_EQ(file.k, 2u);
  EXPECT_EQ(file.split.top_tokens, split.top_tokens);
  EXPECT_EQ(file.split.sampled_ranks, split.sampled_ranks);
  EXPECT_TRUE(same_bits(file.as_packed(batch.view()), packed)) << "the last slots' tokens are the batch's";
}

TEST(BatchFile, AResultOfBothLayoutsOrNeitherIsRefused) {
  ResultData packed(1, 2);
  const fs::path path = temp_path("layouts.safetensors");
  const std::vector<std::uint32_t> tokens = {0, 0};
  const std::vector<float> values = {0.0f, 0.0f};
  std::vector<SafetensorsTensor> both = {
      tensor_of("lp_logits", "F32", {1, 2}, std::span<const float>(values)),
      tensor_of("lp_tokens", "U32", {1, 2}, std::span<const std::uint32_t>(tokens)),
      tensor_of("sampled_logprobs", "F32", {1}, std::span<const float>(values).first(1)),
  };
  write_safetensors(path, both, {});
  EXPECT_THROW(read_result_file(path), FileError);
  write_safetensors(path, std::span<const SafetensorsTensor>(both).last(0), {});
  try {
    read_result_file(path);
    ADD_FAILURE() << "an empty file was read as a result";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a packed result"), std::string::npos) << e.what();
  }
}

// The case: ranks stored under the other layout's name were never judged, so a wrong
// rank passed. Such a tensor is refused by name.
TEST(BatchFile, ARankTensorOfTheOtherLayoutIsRefused) {
  const fs::path path = temp_path("other_layout_ranks.safetensors");
  const std::vector<std::uint32_t> tokens = {0, 0}, ranks = {7};
  const std::vector<float> values = {0.0f, 0.0f};
  const std::vector<SafetensorsTensor> packed = {
      tensor_of("lp_logits", "F32", {1, 2}, std::span<const float>(values)),
      tensor_of("lp_tokens", "U32", {1, 2}, std::span<const std::uint32_t>(tokens)),
      tensor_of("sampled_ranks", "U32", {1}, std::span<const std::uint32_t>(ranks)),
  };
  const std::vector<SafetensorsTensor> split = {
      tensor_of("top_tokens", "U32", {1, 1}, std::span<const std::uint32_t>(tokens).first(1)),
      tensor_of("top_logprobs", "F32", {1, 1}, std::span<const float>(values).first(1)),
      tensor_of("sampled_logprobs", "F32", {1}, std::span<const float>(values).first(1)),
      tensor_of("lp_ranks", "U32", {1}, std::span<const std::uint32_t>(ranks)),
  };
  const std::pair<const std::vector<SafetensorsTensor>*, std::string> cases[] = {
      {&packed, "holds sampled_ranks, a tensor of the split layout, beside the packed layout's lp_logits"},
      {&split, "holds lp_ranks, a tensor of the packed layout, beside the split layout's top_tokens"},
  };
  for (const auto& [tensors, fragment] : cases) {
    write_safetensors(path, *tensors, {});
    try {
      read_result_file(path);
      ADD_FAILURE() << "read: " << fragment;
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  }
}

// The case: save_batch(..., metadata={"k": "007"}) wrote a file that the reader refuses.
// The writers check "k" and "levels" as the reader does, and a k beside metadata naming another.
TEST(BatchFile, MetadataTheReaderWouldRefuseIsNotWritten) {
  const fs::path path = temp_path("bad_metadata.safetensors");
  BatchData batch;
  batch.vocab = batch.row_stride = 1;
  const std::pair<FileMetadata, std::string> refused[] = {
      {{{"k", "007"}}, "metadata k = '007' is not a plain decimal integer in 0..65535"},
      {{{"k", "65536"}}, "metadata k = '65536' is not a plain decimal integer"},
      {{{"levels", "-1"}}, "metadata levels = '-1' is not a plain decimal integer in 0..16"},
      {{{"k", "3"}, {"levels", "3"}}, "metadata k = 3 and levels = 3 disagree"},
  };
  for (const auto& [metadata, fragment] : refused) {
    for (int writer = 0; writer < 2; ++writer) {
      try {
        if (writer == 0)
          write_batch_file(path, batch, std::nullopt, metadata);
        else
          write_result_file(path, ResultData(0, 1), metadata);
        ADD_FAILURE() << "written: " << fragment;
      } catch (const FileError& e) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      }
      EXPECT_FALSE(fs::exists(path)) << fragment;
    }
  }
  try {
    write_batch_file(path, batch, 5, {{"k", "7"}});
    ADD_FAILURE() << "k = 5 written over metadata k = 7";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("k = 5 but metadata k = '7'"), std::string::npos) << e.what();
  }
  write_batch_file(path, batch, 7, {{"k", "7"}, {"levels", "3"}});
  EXPECT_EQ(read_batch_file(path).k, 7u);
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

// JSON text is UTF-8: a metadata string that is not (from the C API, any bytes) is refused by
// name, and no file is left behind.
TEST(BatchFile, MetadataThatIsNotUtf8IsRefusedAndNothingWritten) {
  const fs::path path = temp_path("not_utf8.safetensors");
  const std::vector<float> values = {0.0f};
  const std::vector<SafetensorsTensor> tensors = {tensor_of("x", "F32", {1}, std::span<const float>(values))};
  try {
    write_safetensors(path, tensors, {{"note", "\xff"}});
    ADD_FAILURE() << "metadata that is not UTF-8 was written";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(BatchFile, Bf16LogitsAreWidenedExactly) {
  // 1.0, -2.5, -inf, NaN, the smallest positive bf16 subnormal
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc020, 0xff80, 0x7fc0, 0x0001};
  const fs::path path = temp_path("bf16.safetensors");
  write_half_batch(path, "BF16", bf16);
  const BatchData batch = read_batch_file(path).batch;
  ASSERT_EQ(batch.vocab, 5u);
  EXPECT_EQ(batch.row_stride, 5u);
  EXPECT_EQ(batch.logit(0, 0), 1.0f);
  EXPECT_EQ(batch.logit(0, 1), -2.5f);
  EXPECT_EQ(batch.logit(0, 2), -kInf);
  EXPECT_TRUE(std::isnan(batch.logit(0, 3)));
  EXPECT_EQ(batch.logit(0, 4), std::ldexp(1.0f, -133));
}

TEST(BatchFile, F16LogitsAreWidenedExactly) {
  // 1.0, -2.5, 65504 (largest), -inf, NaN, the smallest positive subnormal 2^-24, -0
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc100, 0x7bff, 0xfc00, 0x7e00, 0x0001, 0x8000};
  const fs::path path = temp_path("f16.safetensors");
  write_half_batch(path, "F16", f16);
  const BatchData batch = read_batch_file(path).batch;
  ASSERT_EQ(batch.vocab, 7u);
  EXPECT_EQ(batch.logit(0, 0), 1.0f);
  EXPECT_EQ(batch.logit(0, 1), -2.5f);
  EXPECT_EQ(batch.logit(0, 2), 65504.0f);
  EXPECT_EQ(batch.logit(0, 3), -kInf);
  EXPECT_TRUE(std::isnan(batch.logit(0, 4)));
  EXPECT_EQ(batch.logit(0, 5), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(batch.logit(0, 6)) && batch.logit(0, 6) == 0.0f);
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

// What the format allows beside the refusals of the table: space padding after the JSON (our
// writer and every other pad to 8 bytes), nesting to serde_json's 128 levels, empty tensors
// anywhere (they hold no bytes, so they overlap nothing).
TEST(BatchFileMalformed, PaddingNestingAndEmptyTensorsAreAccepted) {
  EXPECT_EQ(batch_error(file_with_header(valid_header().dump() + "       ")), "");
  EXPECT_EQ(batch_error(file_with_header(testing_support::header_nested(128))), "");
  ordered_json h = valid_header();
  h["tokens"]["data_offsets"] = {4, 4};  // inside logits [0, 8]
  EXPECT_EQ(batch_error(file_with_header(h.dump())), "");
}

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
