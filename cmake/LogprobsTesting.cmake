# logprobs_add_test(NAME SOURCES... [LIBRARIES lib...] [LABELS label...])
#
# One GoogleTest executable whose tests ctest discovers. It links the judging library (and
# through it the registry of every backend) and gtest_main, plus LIBRARIES; LABELS select tests
# for a run (the ThreadSanitizer job runs `ctest -L concurrency`). Backend folders call it for
# the tests beside their code, so a backend with tests touches only its folder. A no-op when
# LOGPROBS_BUILD_TESTS is off.
if(LOGPROBS_BUILD_TESTS)
  enable_testing()
  find_package(GTest REQUIRED CONFIG)
  include(GoogleTest)
endif()

function(logprobs_add_test name)
  if(NOT LOGPROBS_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LIBRARIES;LABELS")
  add_executable(${name} ${arg_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE logprobs_harness GTest::gtest_main ${arg_LIBRARIES})
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  set(properties "")
  if(arg_LABELS)
    set(properties PROPERTIES LABELS "${arg_LABELS}")
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 ${properties})
endfunction()

# logprobs_python_with(MODULE OUT): an interpreter that imports MODULE: the python3 CMake finds
# first if it does, else Debian's /usr/bin/python3 (whose packages, python3-torch and
# python3-matplotlib, serve only it; the first python3 on PATH may be a pyenv or a venv without
# them). OUT is the found one's path, or the first python3 when none imports MODULE (the test
# then skips, saying so).
function(logprobs_python_with module out)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(found ${Python3_EXECUTABLE})
  foreach(candidate IN ITEMS ${Python3_EXECUTABLE} /usr/bin/python3)
    if(EXISTS ${candidate})
      execute_process(COMMAND ${candidate} -c "import ${module}" RESULT_VARIABLE missing OUTPUT_QUIET ERROR_QUIET)
      if(missing EQUAL 0)
        set(found ${candidate})
        break()
      endif()
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# logprobs_other_pythons(OUT): CPythons 3.8 or newer besides the default ones (Debian's
# /usr/bin/python3 and the first python3 on PATH), one per minor version: pyenv's versions and
# python3.N on PATH. The Python package is tested under each, to show that one build serves them.
function(logprobs_other_pythons out)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(seen "")
  foreach(default IN ITEMS /usr/bin/python3 ${Python3_EXECUTABLE})
    if(EXISTS ${default})
      execute_process(COMMAND ${default} -c "import sys; print('%d.%d' % sys.version_info[:2])"
                      OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      list(APPEND seen "${version}")
    endif()
  endforeach()
  set(pyenv_root $ENV{PYENV_ROOT})
  if(NOT pyenv_root)
    set(pyenv_root $ENV{HOME}/.pyenv)
  endif()
  file(GLOB candidates ${pyenv_root}/versions/3.*/bin/python3)
  foreach(minor RANGE 8 15)
    find_program(candidate_3_${minor} python3.${minor} NO_CACHE)
    if(candidate_3_${minor})
      list(APPEND candidates ${candidate_3_${minor}})
    endif()
  endforeach()
  set(found "")
  foreach(candidate IN LISTS candidates)
    execute_process(COMMAND ${candidate} -c "import sys; print('%d.%d' % sys.version_info[:2])"
                    OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
    if(NOT failed AND version VERSION_GREATER_EQUAL 3.8 AND NOT version IN_LIST seen)
      list(APPEND seen ${version})
      list(APPEND found ${candidate})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
