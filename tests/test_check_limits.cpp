// logprobs-check's limits on what the user may ask of it: whole-number options as the user
// wrote them (CLI11 alone reads "-1" as 2^64 - 1), lists without duplicates.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "command_runner.hpp"

namespace logprobs {
namespace {

using testing_support::CommandResult;
using testing_support::contains;
using testing_support::logprobs_check;

TEST(CheckOptions, WholeNumbersAreDecimalAndInRange) {
  const std::string campaign = "campaign --time 0 --backends max ";
  const std::pair<std::string, std::string> refused[] = {
      {campaign + "--levels 0 --cases -1", "--cases: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --cases 0x10", "--cases: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --seed -1", "--seed: must be a whole number in decimal digits"},
      {campaign + "--levels 0 --seed 18446744073709551616", "--seed: must be a whole number in decimal digits"},
      {campaign + "--k -1", "--k: must be a whole number in decimal digits"},
      {"compare --input x --max-violations -1", "--max-violations: must be a whole number in decimal digits"},
  };
  for (const auto& [args, fragment] : refused) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << args << "\n" << result.output;
  }
  // Leading zeros read as decimal, not octal.
  const CommandResult decimal = logprobs_check(campaign + "--levels 0 --cases 010");
  EXPECT_EQ(decimal.exit_code, 0) << decimal.output;
  EXPECT_TRUE(contains(decimal.output, "at most 10 random cases")) << decimal.output;
  const CommandResult largest = logprobs_check(campaign + "--levels 0 --cases 1 --seed 18446744073709551615");
  EXPECT_TRUE(contains(largest.output, "seed 18446744073709551615")) << largest.output;
}

TEST(CheckOptions, AListNamingOneThingTwiceIsRefused) {
  const std::pair<std::string, std::string> refused[] = {
      {"campaign --time 0 --levels 0 --backends max,max", "--backends names 'max' twice"},
      {"campaign --time 0 --levels 3,3 --backends max", "--levels lists K = 7 twice"},
      {"campaign --time 0 --k 0,5,0 --backends max", "--k lists K = 0 twice"},
      {"compare --input x --backends max,reference,max", "--backends names 'max' twice"},
  };
  for (const auto& [args, fragment] : refused) {
    const CommandResult result = logprobs_check(args);
    EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
    EXPECT_TRUE(contains(result.output, fragment)) << args << "\n" << result.output;
  }
}

}  // namespace
}  // namespace logprobs
