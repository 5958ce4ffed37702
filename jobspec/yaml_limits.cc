#include "jobspec/yaml_limits.h"

#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"

namespace ringmaster::trainer {
namespace {

// Thrown out of the event parser at the first node over the limit (the parser offers no other
// way to stop it).
struct OverLimit {
  YamlExpansionOverLimit at;
};

class ExpansionCounter final : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(uint64_t limit) : limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { Leaf(mark, anchor, 1); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    Leaf(mark, 0, it == anchors_.end() ? 1 : it->second);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(mark, anchor, value.size() + 1);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Open_ {
    YAML::anchor_t anchor;
    uint64_t size;
  };

  void Count(const YAML::Mark& mark, uint64_t bytes) {
    total_ += bytes;
    if (total_ > limit_) throw OverLimit{{mark, total_}};
  }
  // A node of `size` bytes has ended: its anchor (if any) remembers the size, its parent grows.
  void Ended(YAML::anchor_t anchor, uint64_t size) {
    if (anchor != 0) anchors_[anchor] = size;
    if (!open_.empty()) open_.back().size += size;
  }
  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, uint64_t size) {
    Count(mark, size);
    Ended(anchor, size);
  }
  void Open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    Count(mark, 1);
    open_.push_back({anchor, 1});
  }
  void Close() {
    if (open_.empty()) return;
    const Open_ done = open_.back();
    open_.pop_back();
    Ended(done.anchor, done.size);
  }

  const uint64_t limit_;
  uint64_t total_ = 0;
  std::vector<Open_> open_;
  std::unordered_map<YAML::anchor_t, uint64_t> anchors_;
};

}  // namespace

std::optional<YamlExpansionOverLimit> FindYamlExpansionOverLimit(const std::string& text,
                                                                 uint64_t limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  ExpansionCounter counter(limit);
  try {
    parser.HandleNextDocument(counter);  // the first document only, as ParseJobSpec loads
  } catch (const OverLimit& e) {
    return e.at;
  }
  return std::nullopt;
}

}  // namespace ringmaster::trainer
