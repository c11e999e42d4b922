# Batch and result files (SPEC §7) and the logprobs-check command. Included from
# harness/CMakeLists.txt; kept apart from the comparator's lines there.
find_package(nlohmann_json 3 REQUIRED CONFIG)
add_library(logprobs_batch_file STATIC ${CMAKE_CURRENT_LIST_DIR}/batch_file.cpp)
target_include_directories(logprobs_batch_file PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(logprobs_batch_file PUBLIC logprobs_harness PRIVATE nlohmann_json::nlohmann_json fmt::fmt)
target_compile_options(logprobs_batch_file PRIVATE -Wall -Wextra)
