# Batch and result files (SPEC §7) and the logprobs-check command. Included from
# harness/CMakeLists.txt; kept apart from the comparator's lines there.
find_package(nlohmann_json 3 REQUIRED CONFIG)
add_library(logprobs_batch_file STATIC ${CMAKE_CURRENT_LIST_DIR}/batch_file.cpp)
target_include_directories(logprobs_batch_file PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(logprobs_batch_file PUBLIC logprobs_harness PRIVATE nlohmann_json::nlohmann_json fmt::fmt)
target_compile_options(logprobs_batch_file PRIVATE -Wall -Wextra)

# The campaign and its hand cases, shared by the command and its tests.
add_library(logprobs_campaign STATIC ${CMAKE_CURRENT_LIST_DIR}/campaign.cpp ${CMAKE_CURRENT_LIST_DIR}/hand_cases.cpp)
target_link_libraries(logprobs_campaign PUBLIC logprobs_batch_file logprobs_fuzz_generators nlohmann_json::nlohmann_json
                      PRIVATE fmt::fmt)
target_compile_definitions(logprobs_campaign PRIVATE LOGPROBS_VERSION="${PROJECT_VERSION}")
target_compile_options(logprobs_campaign PRIVATE -Wall -Wextra)

find_package(CLI11 REQUIRED CONFIG)
add_executable(logprobs-check ${CMAKE_CURRENT_LIST_DIR}/logprobs_check.cpp)
target_link_libraries(logprobs-check PRIVATE logprobs_campaign CLI11::CLI11 fmt::fmt)
target_compile_options(logprobs-check PRIVATE -Wall -Wextra)
