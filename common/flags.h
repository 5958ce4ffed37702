// The command-line parser every Ringmaster binary uses (ringmaster, -coordinator, -agent,
// -trainer), so that all four behave alike:
//   - flags anywhere among the arguments, as `--flag value` or `--flag=value`; `--` ends them;
//   - `-h`/`--help` (also `help [COMMAND]` for binaries with commands) prints the usage, every
//     flag with its default and meaning, and exits 0;
//   - `--version` prints the version, git revision and what the build has (common/version.h);
//   - an unknown flag is an error that names the nearest known one.
// Values are kept as text: each binary converts and range-checks them, with its own messages.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster {

class FlagSet {
 public:
  // `program`: as the user types it ("ringmaster"); `summary`: one line on what it does.
  FlagSet(std::string program, std::string summary);

  // A command ("submit"): `args` are its positional arguments for the usage line ("JOB.yaml"),
  // `summary` one line, `details` (optional) more lines for its --help. A FlagSet with commands
  // needs one as the first positional argument.
  void AddCommand(std::string name, std::string args, std::string summary,
                  std::string details = "");
  // Text after the flags in --help (environment, notes); for a set without commands, also the
  // positional arguments of the usage line.
  void SetNotes(std::string notes) { notes_ = std::move(notes); }
  void SetPositionalUsage(std::string args) { positional_usage_ = std::move(args); }

  // Flags. `commands`: the commands that take it (empty: every command, a global flag). A name
  // may be registered once per command, with its own default and help ("--max-len").
  // `out` (may be null) receives the value; it keeps what it held when the flag is not given.
  // `default_text` is shown in --help ("127.0.0.1:7070", "required", "none").
  void Value(std::string name, std::string value_name, std::string* out, std::string default_text,
             std::string help, std::vector<std::string> commands = {});
  // A flag that may be given many times; each value is appended to `out`.
  void List(std::string name, std::string value_name, std::vector<std::string>* out,
            std::string help, std::vector<std::string> commands = {});
  // A switch: present sets `*out` (may be null) true; `--name=false` sets it false.
  void Switch(std::string name, bool* out, std::string help,
              std::vector<std::string> commands = {});

  enum class Action { kRun, kHelp, kVersion };
  // Parses `args` (argv without the program). Errors name the argument and, for an unknown
  // flag, the nearest known one.
  absl::StatusOr<Action> Parse(const std::vector<std::string>& args);

  // Parse, and handle what ends the program: --help (usage to stdout), --version (to stdout),
  // errors (to stderr with a pointer to --help). Returns the exit code then (0 or 2), nullopt
  // when the program should go on.
  std::optional<int> ParseOrExit(int argc, char** argv);

  // After Parse: the command ("" without commands), the other positional arguments, and
  // whether a flag was given (its last value in value()).
  const std::string& command() const { return command_; }
  const std::vector<std::string>& positional() const { return positional_; }
  bool given(std::string_view name) const { return given_.count(std::string(name)) > 0; }
  std::optional<std::string> value(std::string_view name) const;

  // The --help text: of `command` when given, else of the whole program.
  std::string Help(std::string_view command = "") const;
  // One line: "usage: ... (see --help)", printed after errors.
  std::string UsageHint() const;

 private:
  enum class Kind { kValue, kList, kSwitch };
  struct Flag {
    std::string name;
    Kind kind;
    std::string value_name;
    std::string default_text;
    std::string help;
    std::vector<std::string> commands;
    std::string* value_out = nullptr;
    std::vector<std::string>* list_out = nullptr;
    bool* switch_out = nullptr;
  };
  struct Command {
    std::string name;
    std::string args;
    std::string summary;
    std::string details;
  };
  void Add(Flag f);
  // The flag `name` as `command` takes it; null when it has no such flag.
  const Flag* Find(std::string_view name, std::string_view command) const;
  bool TakesValue(std::string_view name) const;
  bool Known(std::string_view name) const;
  std::vector<std::string> FlagNames(std::string_view command) const;
  const Command* FindCommand(std::string_view name) const;
  void AppendFlagHelp(std::string* out, const Flag& f) const;

  std::string program_;
  std::string summary_;
  std::string notes_;
  std::string positional_usage_;
  std::vector<Command> commands_;
  std::vector<Flag> flags_;
  std::string command_;
  std::vector<std::string> positional_;
  std::map<std::string, std::string> given_;
  std::string help_for_;  // the command --help was asked for
};

}  // namespace ringmaster
