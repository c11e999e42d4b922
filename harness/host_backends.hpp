// The backends that compute on the host, reading a batch's memory in place. Tests that hand a
// backend memory only the host can read (a sparse mmap) or that run under a host sanitizer use
// these; device backends copy whole buffers and are checked on their own machine.
#pragma once

#include <vector>

#include "logprobs/backend.hpp"

namespace logprobs {

// Every registered host backend that is available here, in registration order (reference first).
inline std::vector<const Backend*> available_host_backends() {
  std::vector<const Backend*> found;
  for (const Backend* backend : all_backends()) {
    if (backend->computes_on_host() && backend->availability().available) found.push_back(backend);
  }
  return found;
}

}  // namespace logprobs
