// Every kind of malformed batch file, as raw bytes with the fragment its error message must
// hold. One table, judged both by read_batch_file (test_batch_file) and end to end by
// `logprobs-check run` (test_logprobs_check).
#pragma once

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace logprobs::testing_support {

// A valid batch file's header: V = 2, one row, B = 1, no tokens; 36 bytes of data.
inline nlohmann::ordered_json valid_header() {
  nlohmann::ordered_json h;
  h["logits"] = {{"dtype", "F32"}, {"shape", {1, 2}}, {"data_offsets", {0, 8}}};
  h["tokens"] = {{"dtype", "U32"}, {"shape", {0}}, {"data_offsets", {8, 8}}};
  h["sampled_tokens"] = {{"dtype", "U32"}, {"shape", {1}}, {"data_offsets", {8, 12}}};
  h["logit_row_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {12, 20}}};
  h["token_row_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {20, 28}}};
  h["lp_output_offsets"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {28, 36}}};
  return h;
}
inline constexpr std::size_t kValidDataBytes = 36;

inline std::string length_prefix(std::uint64_t length) {
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &length, 8);
  return bytes;
}

inline std::string file_with_header(const std::string& header, std::size_t data_bytes = kValidDataBytes) {
  return length_prefix(header.size()) + header + std::string(data_bytes, '\0');
}

// The valid header with `levels` levels of JSON open at its deepest: the header, the logits
// entry, and in that an ignored field of nested arrays. The format's reference reader (serde_json)
// stops at 128.
inline std::string header_nested(int levels) {
  std::string header = valid_header().dump();
  const std::string logits = R"({"logits":{)";
  header.replace(0, logits.size(),
                 logits + R"("x":)" + std::string(levels - 2, '[') + std::string(levels - 2, ']') + ",");
  return header;
}

struct MalformedFile {
  std::string name;
  std::string bytes;
  std::string fragment;  // what the error message must say
};

inline std::vector<MalformedFile> malformed_batch_files() {
  std::vector<MalformedFile> files = {
      {"short file", std::string(5, '\0'), "shorter than the 8-byte header length"},
      {"huge header length", length_prefix(std::uint64_t{1} << 62) + "{}", "runs past the end of the file"},
      {"all-ones header length", length_prefix(~std::uint64_t{0}) + "{}", "runs past the end of the file"},
      {"header past the end", length_prefix(100) + std::string(20, ' '), "runs past the end of the file"},
      {"truncated JSON", file_with_header("{\"logits\": {\"dtype\": "), "not valid JSON"},
      {"JSON not an object", file_with_header("[1, 2]"), "expected an object of tensors"},
      // nlohmann reports a number beyond double's range as out_of_range, not parse_error.
      {"number beyond double", file_with_header("{\"logits\": 1e999}"), "not valid JSON"},
      // Not UTF-8: the message names the byte (quoting it as JSON text would throw).
      {"header starting with byte 0x80", file_with_header("\x80\"logits\": {}}"), "starts with byte 0x80"},
  };
  // The rest alter one thing of a valid header.
  const auto altered = [&](const std::string& name, const std::string& fragment, auto alter,
                           std::size_t data_bytes = kValidDataBytes) {
    nlohmann::ordered_json h = valid_header();
    alter(h);
    files.push_back({name, file_with_header(h.dump(), data_bytes), fragment});
  };
  using Header = nlohmann::ordered_json;
  altered("unknown dtype", "unknown dtype 'F99'", [](Header& h) { h["logits"]["dtype"] = "F99"; });
  altered("tokens not U32", "'sampled_tokens' has dtype I32, expected U32",
          [](Header& h) { h["sampled_tokens"]["dtype"] = "I32"; });
  altered("logits not float", "'logits' has dtype U32, expected F32, BF16 or F16",
          [](Header& h) { h["logits"]["dtype"] = "U32"; });
  altered("shape disagrees with bytes", "needs 12 bytes but data_offsets [0, 8] hold 8",
          [](Header& h) { h["logits"]["shape"] = {1, 3}; });
  altered("data offsets past the end", "past the end of the data (30 bytes)",
          [](Header& h) { h["lp_output_offsets"]["data_offsets"] = {28, 36}; }, 30);
  altered("data offsets out of order", "out of order", [](Header& h) { h["sampled_tokens"]["data_offsets"] = {12, 8}; });
  altered("data offsets overlap", "overlap", [](Header& h) { h["sampled_tokens"]["data_offsets"] = {4, 8}; });
  // Sorted by begin, the empty tensor at [2, 2] sits between logits [0, 8] and sampled_tokens
  // [4, 8], which overlap.
  altered("empty tensor between overlapping ones", "tensors 'logits' [0, 8] and 'sampled_tokens' [4, 8] overlap",
          [](Header& h) {
            h["tokens"]["data_offsets"] = {2, 2};
            h["sampled_tokens"]["data_offsets"] = {4, 8};
          });
  altered("shape product overflows", "overflows 64 bits",
          [](Header& h) { h["logits"]["shape"] = {std::uint64_t{1} << 40, std::uint64_t{1} << 40}; });
  altered("negative dimension", "expected a non-negative integer", [](Header& h) { h["logits"]["shape"] = {1, -2}; });
  altered("missing tensor", "missing tensor 'token_row_offsets'", [](Header& h) { h.erase("token_row_offsets"); });
  altered("logits of rank 1", "'logits' has shape [2] of rank 1, expected rank 2",
          [](Header& h) { h["logits"]["shape"] = {2}; });
  altered("offsets of rank 2", "'logit_row_offsets' has shape [1, 2] of rank 2, expected rank 1",
          [](Header& h) { h["logit_row_offsets"]["shape"] = {1, 2}; });
  altered("levels out of range", "metadata levels = '17' is not a plain decimal integer in 0..16", [](Header& h) {
    h["__metadata__"] = {{"levels", "17"}};
  });
  altered("metadata not a string", "expected a string", [](Header& h) { h["__metadata__"] = {{"levels", 3}}; });

  // What JSON readers let through and the format refuses; nlohmann keeps the last of duplicate
  // keys, skips a byte-order mark and stops at a NUL. Each would let a broken part pass unseen.
  const std::string valid = valid_header().dump();
  const auto raw = [&](const std::string& name, const std::string& header, const std::string& fragment) {
    files.push_back({name, file_with_header(header), fragment});
  };
  raw("duplicate tensor, the first broken",
      R"({"logits":{"dtype":"F99","shape":[9],"data_offsets":[0,999]},)" + valid.substr(1),
      R"(header has the key "logits" twice in one object)");
  std::string twice_dtype = valid;
  twice_dtype.replace(twice_dtype.find(R"("dtype":"F32")"), 13, R"("dtype":"F99","dtype":"F32")");
  raw("duplicate field in a tensor", twice_dtype, R"(header has the key "dtype" twice)");
  raw("duplicate metadata key", R"({"__metadata__":{"k":"70000","k":"1"},)" + valid.substr(1),
      R"(header has the key "k" twice)");
  raw("bytes after a NUL", valid + std::string("\0{\"more\": 1}", 12), "header has a NUL byte at offset");
  raw("trailing newline", valid + "\n", "header has bytes other than spaces after its JSON object");
  raw("text after the padding", valid + "   x", "not valid JSON");
  raw("UTF-8 byte-order mark", "\xEF\xBB\xBF" + valid, "byte-order mark");
  raw("leading space", " " + valid, "header starts with \" \", expected an object of tensors");
  raw("nested 129 levels", header_nested(129), "header nests deeper than 128 levels");
  return files;
}

}  // namespace logprobs::testing_support
