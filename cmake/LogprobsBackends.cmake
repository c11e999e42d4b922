# Backend registration. Each backend folder builds a library that defines a factory
#   std::unique_ptr<logprobs::Backend> FACTORY()
# and calls
#   logprobs_register_backend(TARGET FACTORY)
# or, for a backend that comes with variants (the same kernel in forced configurations, see
# Backend::variant_of), a factory returning std::vector<std::unique_ptr<logprobs::Backend>>:
#   logprobs_register_backend(TARGET FACTORY VARIANTS)
# The top level then calls logprobs_generate_registry(NAME) once, which generates the list that
# logprobs::all_backends() returns, in registration order.

function(logprobs_register_backend target factory)
  cmake_parse_arguments(PARSE_ARGV 2 arg "VARIANTS" "" "")
  set(kind one)
  if(arg_VARIANTS)
    set(kind many)
  endif()
  set_property(GLOBAL APPEND PROPERTY LOGPROBS_BACKEND_TARGETS ${target})
  set_property(GLOBAL APPEND PROPERTY LOGPROBS_BACKEND_FACTORIES "${kind}:${factory}")
endfunction()

function(logprobs_generate_registry name)
  get_property(targets GLOBAL PROPERTY LOGPROBS_BACKEND_TARGETS)
  get_property(factories GLOBAL PROPERTY LOGPROBS_BACKEND_FACTORIES)
  set(LOGPROBS_FACTORY_DECLARATIONS "")
  set(LOGPROBS_FACTORY_CALLS "")
  foreach(entry IN LISTS factories)
    string(REPLACE ":" ";" entry "${entry}")
    list(GET entry 0 kind)
    list(GET entry 1 factory)
    if(kind STREQUAL "many")
      string(APPEND LOGPROBS_FACTORY_DECLARATIONS "std::vector<std::unique_ptr<Backend>> ${factory}();\n")
      string(APPEND LOGPROBS_FACTORY_CALLS "  for (auto& b : ${factory}()) backends.push_back(std::move(b));\n")
    else()
      string(APPEND LOGPROBS_FACTORY_DECLARATIONS "std::unique_ptr<Backend> ${factory}();\n")
      string(APPEND LOGPROBS_FACTORY_CALLS "  backends.push_back(${factory}());\n")
    endif()
  endforeach()
  set(generated ${PROJECT_BINARY_DIR}/generated/registered_backends.gen.cpp)
  configure_file(${PROJECT_SOURCE_DIR}/src/registered_backends.gen.cpp.in ${generated} @ONLY)
  add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/src/registry.cpp ${generated})
  target_link_libraries(${name} PUBLIC logprobs_contract ${targets})
  message(STATUS "logprobs backends: ${targets}")
endfunction()
