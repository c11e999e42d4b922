#include <gtest/gtest.h>

#include <set>
#include <string_view>

#include "harness/batch_data.hpp"

namespace logprobs {
namespace {

TEST(Registry, ListsReferenceFirstAndFindsByName) {
  const auto all = all_backends();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0]->name(), kReferenceName);
  EXPECT_EQ(&reference_backend(), all[0]);
  EXPECT_EQ(find_backend("max"), all[1]);
  EXPECT_EQ(find_backend("no-such-backend"), nullptr);
  for (const Backend* b : all) EXPECT_FALSE(b->description().empty()) << b->name();
}

TEST(Registry, NamesAreUniqueAndVariantsNameARegisteredBackend) {
  std::set<std::string_view> names;
  for (const Backend* b : all_backends()) {
    EXPECT_TRUE(names.insert(b->name()).second) << "two backends named " << b->name();
    if (b->variant_of().empty()) continue;
    const Backend* of = find_backend(b->variant_of());
    ASSERT_NE(of, nullptr) << b->name() << " is a variant of unregistered " << b->variant_of();
    EXPECT_TRUE(of->variant_of().empty()) << b->name() << ": a variant of a variant";
  }
}

TEST(Registry, ReferenceAndMaxAvailableEverywhere) {
  EXPECT_TRUE(reference_backend().availability().available);
  EXPECT_TRUE(find_backend("max")->availability().available);
}

}  // namespace
}  // namespace logprobs
