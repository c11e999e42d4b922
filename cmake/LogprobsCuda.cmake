# LOGPROBS_CUDA: AUTO builds the CUDA backend when a CUDA compiler is found, ON requires one,
# OFF skips it. Included from the top level because enable_language(CUDA) must happen in the
# directory that holds every target linking CUDA code (the tests and tools link the backend).
# Sets LOGPROBS_CUDA_ENABLED.
set(LOGPROBS_CUDA_ENABLED OFF)
if(NOT LOGPROBS_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "LOGPROBS_CUDA must be AUTO, ON or OFF, got '${LOGPROBS_CUDA}'")
endif()

if(NOT LOGPROBS_CUDA STREQUAL "OFF")
  # nvcc is installed at /usr/local/cuda but not always on PATH; check_language only searches
  # PATH and CUDACXX, so point it there when nothing else was chosen.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(_logprobs_nvcc_on_path nvcc PATHS ENV PATH NO_DEFAULT_PATH NO_CACHE)
    if(NOT _logprobs_nvcc_on_path)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper machine code plus PTX, which newer GPUs' drivers compile at load time.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # SPEC §3: no flag that changes NaN/inf behaviour.
    if(CMAKE_CUDA_FLAGS MATCHES "use_fast_math|ftz=true|prec-div=false|prec-sqrt=false")
      message(FATAL_ERROR "logprobs-harness must not be built with ${CMAKE_CUDA_FLAGS} (SPEC §3)")
    endif()
    set(LOGPROBS_CUDA_ENABLED ON)
    message(STATUS "logprobs: CUDA backend enabled (${CMAKE_CUDA_COMPILER}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(LOGPROBS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LOGPROBS_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or CUDACXX)")
  else()
    message(STATUS "logprobs: no CUDA compiler found, the CUDA backend is not built (LOGPROBS_CUDA=AUTO)")
  endif()
endif()
