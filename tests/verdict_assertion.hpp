// A comparator verdict as a GoogleTest assertion, for every test that judges a result: the
// failure message holds the first violations.
#pragma once

#include <gtest/gtest.h>

#include "harness/comparator.hpp"

namespace logprobs::testing_support {

inline ::testing::AssertionResult agrees(const Verdict& verdict) {
  if (verdict.ok()) return ::testing::AssertionSuccess();
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << verdict.violations.size() << " violation(s):";
  for (std::size_t i = 0; i < verdict.violations.size() && i < 5; ++i)
    failure << "\n  " << verdict.violations[i].message();
  return failure;
}

}  // namespace logprobs::testing_support
