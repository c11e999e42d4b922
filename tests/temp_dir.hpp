// A temporary folder for one test process, removed when its tests are done.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace logprobs::testing_support {

// One folder per process: ctest runs each test in its own process, several at once.
inline std::filesystem::path temp_dir() {
  static const std::filesystem::path dir = [] {
    auto path = std::filesystem::path(testing::TempDir()) / ("logprobs-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    struct Remove : testing::Environment {
      std::filesystem::path path;
      explicit Remove(std::filesystem::path p) : path(std::move(p)) {}
      void TearDown() override {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
      }
    };
    testing::AddGlobalTestEnvironment(new Remove(path));
    return path;
  }();
  return dir;
}

inline std::filesystem::path temp_path(const std::string& name) { return temp_dir() / name; }

}  // namespace logprobs::testing_support
