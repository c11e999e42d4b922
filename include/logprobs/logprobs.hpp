// The whole public contract in one include.
#pragma once

#include "logprobs/backend.hpp"
#include "logprobs/batch.hpp"
#include "logprobs/errors.hpp"
#include "logprobs/validate.hpp"
