#!/bin/sh
# ringmaster-trainer-launch: what an agent's --trainer points at in the images and the systemd
# units. The agent hands its trainers a fixed, short list of its own variables (PATH, HOME,
# LANG, LD_LIBRARY_PATH, OMP_NUM_THREADS, ...; agent/rank_supervisor.h), so node settings such
# as RINGMASTER_GLOO_IFACE, RINGMASTER_METRICS_PORT or NCCL_* ones are read here from a
# file the operator owns (/etc/ringmaster/trainer.env) and added before the real trainer, which
# sits next to this script, is exec'd with the same arguments.
#
# File format: KEY=VALUE lines, '#' comments and blank lines ignored; values are taken
# literally (no quotes, no expansion). A variable already set in the environment (the rank's
# torchrun and RINGMASTER_* variables from the coordinator) is never overridden.
# RINGMASTER_TRAINER_ENV_FILE picks another file; the agent never passes it, so only whoever
# starts this script by hand (a test) can set it.
set -eu
env_file=${RINGMASTER_TRAINER_ENV_FILE:-/etc/ringmaster/trainer.env}
here=$(dirname "$0")
trainer=${here}/ringmaster-trainer
if [ ! -x "$trainer" ]; then
  echo "ringmaster-trainer-launch: $trainer is not an executable file" >&2
  exit 3
fi
if [ -r "$env_file" ]; then
  lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    case $line in
      '' | '#'*) continue ;;
    esac
    key=${line%%=*}
    value=${line#*=}
    case $key in
      "$line" | '' | [0-9]* | *[!A-Z0-9_]*)
        echo "ringmaster-trainer-launch: $env_file:$lineno: expected KEY=VALUE with KEY in [A-Z0-9_]" >&2
        exit 3
        ;;
    esac
    if eval "[ -z \"\${$key+set}\" ]"; then
      export "$key=$value"
    fi
  done <"$env_file"
fi
exec "$trainer" "$@"
