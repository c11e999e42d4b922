#include "report_schema.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>
#include <vector>

#include "report_schemas.hpp"  // generated from docs/schemas/*.json: kReportSchemaTexts

namespace logprobs {
namespace {

using valijson::adapters::NlohmannJsonAdapter;

// The schema documents by file name; each is the text of docs/schemas/<name>.
const std::map<std::string, nlohmann::json, std::less<>>& schema_documents() {
  static const auto* documents = [] {
    auto* parsed = new std::map<std::string, nlohmann::json, std::less<>>;
    for (const auto& [name, text] : kReportSchemaTexts) parsed->emplace(name, nlohmann::json::parse(text));
    return parsed;
  }();
  return *documents;
}

// valijson fetches a document that a $ref names by its absolute URI; ours end in the file name.
const nlohmann::json* fetch_document(const std::string& uri) {
  const std::string_view name = std::string_view(uri).substr(uri.rfind('/') + 1);
  const auto& documents = schema_documents();
  const auto found = documents.find(name);
  if (found == documents.end()) throw std::logic_error("report schema: $ref to unknown document " + uri);
  return &found->second;
}

void free_document(const nlohmann::json*) {}  // the documents live as long as the process

const valijson::Schema& parsed_schema(ReportSchema which) {
  static std::once_flag once;
  static valijson::Schema campaign, verify;
  std::call_once(once, [] {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    for (auto [schema, name] : {std::pair{&campaign, "campaign-report.schema.json"},
                                std::pair{&verify, "verify-report.schema.json"}})
      parser.populateSchema(NlohmannJsonAdapter(*fetch_document(name)), *schema, fetch_document, free_document);
  });
  return which == ReportSchema::campaign ? campaign : verify;
}

// valijson 1.0's nlohmann adapter reads every integer as int64_t, so an unsigned value above
// 2^63 - 1 (a seed, say) reads as negative and fails "minimum": 0. For the bounds our schemas
// set (every maximum below 2^63, or none), INT64_MAX in its place gives the same verdict; the
// values are set aside and put back once validated.
class ClampedUnsigned {
 public:
  explicit ClampedUnsigned(nlohmann::json& json) { clamp(json); }
  ~ClampedUnsigned() {
    for (auto& [value, original] : saved_) *value = original;
  }
  ClampedUnsigned(const ClampedUnsigned&) = delete;
  ClampedUnsigned& operator=(const ClampedUnsigned&) = delete;

 private:
  void clamp(nlohmann::json& json) {
    if (json.is_structured()) {
      for (nlohmann::json& child : json) clamp(child);
    } else if (json.is_number_unsigned() && json.get<std::uint64_t>() > std::uint64_t(INT64_MAX)) {
      saved_.emplace_back(&json, json.get<std::uint64_t>());
      json = std::numeric_limits<std::int64_t>::max();
    }
  }
  std::vector<std::pair<nlohmann::json*, std::uint64_t>> saved_;
};

// valijson's context ["<root>", "[results]", "[0]", "[failures]"] as "results[0].failures".
std::string field_of(const std::vector<std::string>& context) {
  std::string field;
  for (std::size_t i = 1; i < context.size(); ++i) {
    const std::string& part = context[i];
    const std::string inner = part.size() >= 2 ? part.substr(1, part.size() - 2) : part;
    const bool index = !inner.empty() && inner.find_first_not_of("0123456789") == std::string::npos;
    if (index)
      field.append("[").append(inner).append("]");
    else
      field.append(field.empty() ? "" : ".").append(inner);
  }
  return field.empty() ? "(the document)" : field;
}

}  // namespace

std::string schema_violation(nlohmann::json& json, ReportSchema schema) {
  const ClampedUnsigned clamped(json);
  valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::ValidationResults results;
  if (validator.validate(parsed_schema(schema), NlohmannJsonAdapter(json), &results)) return "";
  // Each enclosing schema adds its own error ("failed to validate ... property 'results'"); the
  // deepest one says what is wrong.
  valijson::ValidationResults::Error error, deepest;
  while (results.popError(error))
    if (error.context.size() > deepest.context.size()) deepest = error;
  // "Missing required property 'seed'." names the field the context lacks: say it as one name.
  static constexpr std::string_view kMissing = "Missing required property '";
  if (deepest.description.starts_with(kMissing) && deepest.description.ends_with("'.")) {
    const std::string name =
        deepest.description.substr(kMissing.size(), deepest.description.size() - kMissing.size() - 2);
    const std::string parent = field_of(deepest.context);
    return fmt::format("field '{}' is missing", deepest.context.size() > 1 ? parent + "." + name : name);
  }
  return fmt::format("field '{}': {}", field_of(deepest.context), deepest.description);
}

}  // namespace logprobs
