// The JSON Schemas of logprobs-check's reports (docs/schemas/, compiled into the binary): the
// contract of every JSON document the tool writes, and what `merge` checks each report it reads
// against before it reads a field, so that a report missing a field, or holding a count that is
// not a count, is refused by name instead of read as garbage.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace logprobs {

enum class ReportSchema {
  campaign,  // docs/schemas/campaign-report.schema.json: campaign --json, and merge --json
  verify,    // docs/schemas/verify-report.schema.json: verify --json and compare --json
};

// Where `json` breaks the schema, as "field 'results[0].failures': Expected number less than or
// equal to ..." (the deepest error valijson reports), or "" when it keeps it. The document is
// changed while it is validated and left as it was (see ClampedUnsigned), hence not const.
std::string schema_violation(nlohmann::json& json, ReportSchema schema);

}  // namespace logprobs
