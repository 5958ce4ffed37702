#include "jobspec/key_suggestion.h"

#include <algorithm>
#include <utility>

#include "common/suggest.h"

namespace ringmaster::jobspec {
namespace {

// The names other tools give our keys: the last segment of what the user wrote -> our path.
constexpr std::pair<std::string_view, std::string_view> kForeignNames[] = {
    {"learning_rate", "train.lr"},
    {"num_train_epochs", "train.epochs"},
    {"per_device_train_batch_size", "train.micro_batch_size"},
    {"train_micro_batch_size_per_gpu", "train.micro_batch_size"},
    {"train_batch_size", "train.global_batch_size"},
    {"batch_size", "train.global_batch_size"},
    {"per_device_eval_batch_size", "train.eval_batch_size"},
    {"lr_scheduler_type", "train.lr_schedule"},
    {"evaluation_strategy", "train.eval_strategy"},  // transformers before 4.41
    {"adam_epsilon", "train.adam_eps"},
    {"logging_steps", "train.log_every_steps"},
    {"resume_from_checkpoint", "train.resume"},
    {"overwrite_output_dir", "train.resume"},
    {"max_seq_length", "data.max_seq_len"},
    {"train_file", "data.train"},
    {"validation_file", "data.eval"},
    {"model_name_or_path", "model.init_from"},
    {"output_dir", "output.dir"},
    {"save_steps", "output.checkpoint_every_steps"},
    {"nnodes", "distributed.nodes"},
    {"nproc_per_node", "distributed.procs_per_node"},
};

std::string_view LastSegment(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::string_view Parent(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}

bool IsKnown(std::string_view path, const std::vector<std::string>& known) {
  return std::find(known.begin(), known.end(), path) != known.end();
}

}  // namespace

std::optional<std::string> SuggestJobKey(std::string_view path,
                                         const std::vector<std::string>& known) {
  const std::string_view last = LastSegment(path);
  for (const auto& [foreign, ours] : kForeignNames) {
    if (last == foreign && IsKnown(ours, known)) return std::string(ours);
  }
  // The right key in the wrong section: train.max_seq_len -> data.max_seq_len.
  for (const std::string& k : known) {
    if (k != path && LastSegment(k) == last) return k;
  }
  // A typo among its siblings (train.lrr -> train.lr), then among every key (trian -> train).
  std::vector<std::string> siblings;
  for (const std::string& k : known) {
    if (Parent(k) == Parent(path)) siblings.emplace_back(LastSegment(k));
  }
  if (std::optional<std::string> near = NearestName(last, siblings)) {
    const std::string_view parent = Parent(path);
    return parent.empty() ? *near : std::string(parent) + "." + *near;
  }
  return NearestName(path, known);
}

}  // namespace ringmaster::jobspec
