#include "common/flags.h"

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/suggest.h"
#include "common/version.h"

namespace ringmaster {
namespace {

bool IsFlag(std::string_view a) { return a.size() > 1 && a[0] == '-'; }

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagSet::AddCommand(std::string name, std::string args, std::string summary,
                         std::string details) {
  commands_.push_back({std::move(name), std::move(args), std::move(summary), std::move(details)});
}

void FlagSet::Add(Flag f) { flags_.push_back(std::move(f)); }

void FlagSet::Value(std::string name, std::string value_name, std::string* out,
                    std::string default_text, std::string help, std::vector<std::string> commands) {
  Flag f{std::move(name),         Kind::kValue,    std::move(value_name),
         std::move(default_text), std::move(help), std::move(commands)};
  f.value_out = out;
  Add(std::move(f));
}

void FlagSet::List(std::string name, std::string value_name, std::vector<std::string>* out,
                   std::string help, std::vector<std::string> commands) {
  Flag f{std::move(name),    Kind::kList,     std::move(value_name),
         "none; repeatable", std::move(help), std::move(commands)};
  f.list_out = out;
  Add(std::move(f));
}

void FlagSet::Switch(std::string name, bool* out, std::string help,
                     std::vector<std::string> commands) {
  Flag f{std::move(name), Kind::kSwitch, "", "off", std::move(help), std::move(commands)};
  f.switch_out = out;
  Add(std::move(f));
}

const FlagSet::Flag* FlagSet::Find(std::string_view name, std::string_view command) const {
  for (const Flag& f : flags_) {
    if (f.name == name && (f.commands.empty() || Contains(f.commands, command))) return &f;
  }
  return nullptr;
}

bool FlagSet::TakesValue(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name && f.kind != Kind::kSwitch) return true;
  }
  return false;
}

bool FlagSet::Known(std::string_view name) const {
  return std::any_of(flags_.begin(), flags_.end(), [&](const Flag& f) { return f.name == name; });
}

std::vector<std::string> FlagSet::FlagNames(std::string_view command) const {
  std::vector<std::string> names = {"--help", "--version"};
  for (const Flag& f : flags_) {
    if (f.commands.empty() || Contains(f.commands, command)) names.push_back(f.name);
  }
  return names;
}

const FlagSet::Command* FlagSet::FindCommand(std::string_view name) const {
  for (const Command& c : commands_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::optional<std::string> FlagSet::value(std::string_view name) const {
  auto it = given_.find(std::string(name));
  if (it == given_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<FlagSet::Action> FlagSet::Parse(const std::vector<std::string>& args) {
  command_.clear();
  positional_.clear();
  given_.clear();
  // The command is the first positional argument; finding it needs only which flags take a
  // value (every registration of a name agrees on that).
  std::vector<bool> is_positional(args.size(), false);
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      for (size_t j = i + 1; j < args.size(); ++j) is_positional[j] = true;
      break;
    }
    if (!IsFlag(args[i])) {
      is_positional[i] = true;
    } else if (args[i].find('=') == std::string::npos && TakesValue(args[i])) {
      ++i;  // its value
    }
  }
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_positional[i]) positional.push_back(args[i]);
  }
  size_t first_arg = 0;
  if (!commands_.empty() && !positional.empty()) {
    command_ = positional[0];
    first_arg = 1;
    if (command_ == "help") {  // `help [COMMAND]`
      help_for_ = positional.size() > 1 ? positional[1] : "";
      if (!help_for_.empty() && FindCommand(help_for_) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown command '", help_for_, "'"));
      }
      return Action::kHelp;
    }
  }
  positional_.assign(positional.begin() + first_arg, positional.end());

  for (size_t i = 0; i < args.size(); ++i) {
    if (is_positional[i]) continue;
    if (args[i] == "--") break;
    if (args[i] == "-h" || args[i] == "--help") {
      help_for_ = FindCommand(command_) != nullptr ? command_ : "";
      return Action::kHelp;
    }
    if (args[i] == "--version") return Action::kVersion;
  }
  if (!commands_.empty()) {
    if (command_.empty()) return absl::InvalidArgumentError("no command");
    if (FindCommand(command_) == nullptr) {
      std::vector<std::string> names;
      for (const Command& c : commands_) names.push_back(c.name);
      std::string msg = absl::StrCat("unknown command '", command_, "'");
      if (auto near = NearestName(command_, names))
        absl::StrAppend(&msg, "; did you mean '", *near, "'?");
      return absl::InvalidArgumentError(msg);
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_positional[i]) continue;
    if (args[i] == "--") break;
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag* f = Find(name, command_);
    if (f == nullptr) {
      if (Known(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " is not a flag of '", command_, "' (see ", program_, " ", command_, " --help)"));
      }
      std::string msg = absl::StrCat("unknown flag '", name, "'");
      if (auto near = NearestName(name, FlagNames(command_))) {
        absl::StrAppend(&msg, "; did you mean ", *near, "?");
      }
      return absl::InvalidArgumentError(msg);
    }
    if (f->kind == Kind::kSwitch) {
      bool on = true;
      if (eq != std::string::npos) {
        const std::string v = arg.substr(eq + 1);
        if (v == "true" || v == "1") {
          on = true;
        } else if (v == "false" || v == "0") {
          on = false;
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat(name, " is a switch: give it alone, or =true / =false"));
        }
      }
      if (f->switch_out != nullptr) *f->switch_out = on;
      given_[name] = on ? "true" : "false";
      continue;
    }
    std::string v;
    if (eq != std::string::npos) {
      v = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      v = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " needs a value (", name, " ", f->value_name, ")"));
    }
    if (f->value_out != nullptr) *f->value_out = v;
    if (f->list_out != nullptr) f->list_out->push_back(v);
    given_[name] = v;
  }
  return Action::kRun;
}

std::optional<int> FlagSet::ParseOrExit(int argc, char** argv) {
  absl::StatusOr<Action> a = Parse(std::vector<std::string>(argv + 1, argv + argc));
  if (!a.ok()) {
    std::fprintf(stderr, "%s: %s\n%s\n", program_.c_str(),
                 std::string(a.status().message()).c_str(), UsageHint().c_str());
    return 2;
  }
  switch (*a) {
    case Action::kHelp:
      std::fputs(Help(help_for_).c_str(), stdout);
      return 0;
    case Action::kVersion:
      std::printf("%s %s\n", program_.c_str(), VersionText().c_str());
      return 0;
    case Action::kRun:
      break;
  }
  return std::nullopt;
}

std::string FlagSet::UsageHint() const {
  if (const Command* c = FindCommand(command_)) {
    return absl::StrCat("usage: ", program_, " ", c->name, c->args.empty() ? "" : " ", c->args,
                        " [flags]   (all flags: ", program_, " ", c->name, " --help)");
  }
  return absl::StrCat("usage: ", program_, commands_.empty() ? "" : " COMMAND",
                      positional_usage_.empty() ? "" : " ", positional_usage_,
                      " [flags]   (all flags: ", program_, " --help)");
}

void FlagSet::AppendFlagHelp(std::string* out, const Flag& f) const {
  std::string head = absl::StrCat("  ", f.name, f.value_name.empty() ? "" : " ", f.value_name);
  constexpr size_t kColumn = 30;
  if (head.size() + 2 > kColumn) {
    absl::StrAppend(out, head, "\n", std::string(kColumn, ' '));
  } else {
    absl::StrAppend(out, head, std::string(kColumn - head.size(), ' '));
  }
  const std::vector<std::string> lines = absl::StrSplit(f.help, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StrAppend(out, i == 0 ? "" : std::string(kColumn, ' '), lines[i], "\n");
  }
  absl::StrAppend(out, std::string(kColumn, ' '), "default: ", f.default_text, "\n");
}

std::string FlagSet::Help(std::string_view command) const {
  std::string out;
  const Command* c = FindCommand(command);
  if (c != nullptr) {
    absl::StrAppend(&out, "usage: ", program_, " ", c->name, c->args.empty() ? "" : " ", c->args,
                    " [flags]\n", c->summary, "\n");
    if (!c->details.empty()) absl::StrAppend(&out, c->details, "\n");
  } else {
    absl::StrAppend(&out, program_, ": ", summary_, "\n\nusage: ", program_,
                    commands_.empty() ? "" : " COMMAND [ARGS]",
                    positional_usage_.empty() ? "" : " ", positional_usage_, " [flags]\n");
    if (!commands_.empty()) {
      absl::StrAppend(&out, "\ncommands:\n");
      for (const Command& cmd : commands_) {
        std::string head = absl::StrCat("  ", cmd.name, cmd.args.empty() ? "" : " ", cmd.args);
        if (head.size() + 2 > 30) {
          absl::StrAppend(&out, head, "\n", std::string(30, ' '), cmd.summary, "\n");
        } else {
          absl::StrAppend(&out, head, std::string(30 - head.size(), ' '), cmd.summary, "\n");
        }
      }
    }
  }
  absl::StrAppend(&out, "\nFlags may come anywhere, as --flag VALUE or --flag=VALUE.\n");
  // A command's own flags; the whole program's help lists every command's.
  for (const Command& cmd : commands_) {
    if (c != nullptr && c != &cmd) continue;
    bool any_own = false;
    for (const Flag& f : flags_) {
      if (!f.commands.empty() && Contains(f.commands, cmd.name)) {
        if (!any_own) absl::StrAppend(&out, "\nflags of ", cmd.name, ":\n");
        any_own = true;
        AppendFlagHelp(&out, f);
      }
    }
  }
  bool any_global = false;
  for (const Flag& f : flags_) {
    if (!f.commands.empty()) continue;
    if (!any_global) {
      absl::StrAppend(&out, commands_.empty() ? "\nflags:\n" : "\nglobal flags (every command):\n");
    }
    any_global = true;
    AppendFlagHelp(&out, f);
  }
  if (!any_global) absl::StrAppend(&out, commands_.empty() ? "\nflags:\n" : "\n");
  absl::StrAppend(&out,
                  "  -h, --help                  this help; exits 0\n"
                  "  --version                   version, git revision and what this build has "
                  "(CUDA, NCCL); exits 0\n");
  if (!notes_.empty()) absl::StrAppend(&out, "\n", notes_, "\n");
  if (c == nullptr && !commands_.empty()) {
    absl::StrAppend(&out, "\n'", program_,
                    " COMMAND --help' shows one command's flags and the global ones.\n");
  }
  return out;
}

}  // namespace ringmaster
