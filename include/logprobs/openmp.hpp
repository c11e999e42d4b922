// The threads an OpenMP parallel region would get, for code that sizes its work by them; one where
// the build has no OpenMP (LOGPROBS_OPENMP=OFF, the fuzz build), whose pragmas drop out.
#pragma once

#ifdef _OPENMP
#include <omp.h>
#endif

namespace logprobs {

inline int openmp_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace logprobs
