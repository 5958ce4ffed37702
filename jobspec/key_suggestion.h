// "Did you mean": the job key a mistaken one most likely stands for, for the parser's
// "unknown key" errors. Knows the Hugging Face TrainingArguments / run_glue / torchrun names
// users bring (docs/job-reference.md lists the correspondence), keys put in the wrong section,
// and typos.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster::jobspec {

// `path`: the unknown key as written ("train.learning_rate"); `known`: every key path the
// parser accepts (JobSpecKnownKeys). Returns a known path, or nullopt when none is close.
std::optional<std::string> SuggestJobKey(std::string_view path,
                                         const std::vector<std::string>& known);

}  // namespace ringmaster::jobspec
