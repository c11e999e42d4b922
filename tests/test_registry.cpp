#include <gtest/gtest.h>

#include "batch_data.hpp"

namespace logprobs {
namespace {

TEST(Registry, ListsReferenceFirstAndFindsByName) {
  const auto all = all_backends();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0]->name(), "reference");
  EXPECT_EQ(find_backend("max"), all[1]);
  EXPECT_EQ(find_backend("no-such-backend"), nullptr);
  for (const Backend* b : all) EXPECT_FALSE(b->description().empty()) << b->name();
}

TEST(Registry, ReferenceAndMaxAvailableEverywhere) {
  EXPECT_TRUE(find_backend("reference")->availability().available);
  EXPECT_TRUE(find_backend("max")->availability().available);
}

}  // namespace
}  // namespace logprobs
