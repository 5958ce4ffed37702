#!/usr/bin/env bash
# ctest-labels: deploy
# deploy/systemd: `systemd-analyze verify` accepts both units with no complaint at all. verify
# insists that ExecStart's binary exists, and the units name /usr/local/bin, so it runs on a
# temporary copy whose ExecStart points at the binaries built in build/. The flags in ExecStart
# and the example environment file must be flags the binaries accept. ringmaster-trainer-launch
# (scripts/trainer-launch.sh) adds trainer.env to a rank's environment without overriding what
# the rank already has, and refuses a malformed file. Both units pass --metrics-listen (from
# RINGMASTER_COORDINATOR_METRICS / RINGMASTER_AGENT_METRICS); the coordinator serves /metrics
# with the unit's flags and refuses to start when the metrics address is taken; the example
# trainer.env gives the trainers no metrics port of their own. Broken units must be reported.
set -euo pipefail
ROOT=${RINGMASTER_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${RINGMASTER_BINARY_DIR:-$ROOT/build}
command -v systemd-analyze >/dev/null || { echo "no systemd-analyze (scripts/setup.sh installs systemd)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$ROOT/deploy/systemd"
coord=$BIN/coordinator/ringmaster-coordinator
agent=$BIN/agent/ringmaster-agent
for u in ringmaster-coordinator.service ringmaster-agent.service; do
  sed -e "s|^ExecStart=/usr/local/bin/ringmaster-coordinator |ExecStart=$coord |" \
      -e "s|^ExecStart=/usr/local/bin/ringmaster-agent |ExecStart=$agent |" "$u" >"$work/$u"
  grep -q "^ExecStart=$BIN/" "$work/$u" || { echo "FAIL: $u: ExecStart not substituted"; exit 1; }
done
verify() { (cd "$work" && systemd-analyze verify "$@" 2>&1); }
out=$(verify ringmaster-coordinator.service ringmaster-agent.service) || { echo "$out"; echo "FAIL: verify"; exit 1; }
[[ -z $out ]] || { echo "$out"; echo "FAIL: systemd-analyze verify complained"; exit 1; }
echo "systemd-analyze verify: both units clean"

# verify must be able to fail: a bad value, an unknown key, a missing binary.
sed 's/^KillMode=mixed/KillMode=mixd/' "$work/ringmaster-agent.service" >"$work/bad1.service"
sed 's/^NoNewPrivileges=yes/NoNewPrivilege=yes/' "$work/ringmaster-coordinator.service" >"$work/bad2.service"
sed "s|^ExecStart=$coord|ExecStart=/nonexistent/ringmaster-coordinator|" "$work/ringmaster-coordinator.service" >"$work/bad3.service"
for b in bad1 bad2 bad3; do
  out=$(verify $b.service) || true
  [[ -n $out ]] || { echo "FAIL: $b.service passed verify"; exit 1; }
done

# Flags: expand the units' ExecStart with the example environment file and ask the binaries.
# (systemd's EnvironmentFile syntax: KEY=VALUE, the value unquoted may hold spaces.)
while IFS= read -r l; do
  [[ $l =~ ^([A-Z_][A-Z0-9_]*)=(.*)$ ]] || continue
  declare "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}"
done <ringmaster.env.example
for u in ringmaster-coordinator.service ringmaster-agent.service; do
  line=$(sed -n 's/^ExecStart=//p' "$u")
  line=${line//\$\{RINGMASTER_LISTEN\}/$RINGMASTER_LISTEN}
  line=${line//\$\{RINGMASTER_COORDINATOR\}/$RINGMASTER_COORDINATOR}
  line=${line//\$\{RINGMASTER_COORDINATOR_METRICS\}/$RINGMASTER_COORDINATOR_METRICS}
  line=${line//\$\{RINGMASTER_AGENT_METRICS\}/$RINGMASTER_AGENT_METRICS}
  line=${line//\$RINGMASTER_COORDINATOR_ARGS/$RINGMASTER_COORDINATOR_ARGS}
  line=${line//\$RINGMASTER_AGENT_ARGS/$RINGMASTER_AGENT_ARGS}
  [[ $line != *'$'* ]] || { echo "FAIL: $u: unexpanded variable in $line"; exit 1; }
  read -r -a argv <<<"$line"
  case ${argv[0]} in
    */ringmaster-coordinator) b=$coord want="--metrics-listen 0.0.0.0:9400" ;;
    */ringmaster-agent) b=$agent want="--metrics-listen 0.0.0.0:9401" ;;
  esac
  [[ " ${argv[*]} " == *" $want "* ]] || { echo "FAIL: $u: no '$want' in $line"; exit 1; }
  usage=$("$b" --help)
  for a in "${argv[@]:1}"; do
    [[ $a == --* ]] || continue
    grep -q -- "${a%%=*}[ =]\|${a%%=*}\$" <<<"$usage" || { echo "FAIL: $u passes $a, not in $b --help"; exit 1; }
  done
done
# The coordinator really starts with the unit's flags (loopback port and a temporary database),
# its TLS files and tokens made here with openssl in place of /etc/ringmaster/tls.
command -v openssl >/dev/null || { echo "no openssl"; exit 77; }
mkdir "$work/tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=ca -keyout "$work/tls/ca.key" \
  -out "$work/tls/ca.crt" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=coordinator \
  -keyout "$work/tls/coordinator.key" -out "$work/tls/coordinator.crt" 2>/dev/null
(umask 077; openssl rand -hex 16 >"$work/tls/join.token"; openssl rand -hex 16 >"$work/tls/submit.token")
"$coord" --listen 127.0.0.1:0 --db "$work/jobs.db" --advertise "$RINGMASTER_COORDINATOR" \
  --metrics-listen 127.0.0.1:0 ${RINGMASTER_COORDINATOR_ARGS//\/etc\/ringmaster\/tls/$work/tls} 2>"$work/coord.log" &
cpid=$!
for _ in $(seq 1 200); do grep -q "listening on" "$work/coord.log" && break; kill -0 $cpid 2>/dev/null || break; sleep 0.05; done
grep -q "listening on" "$work/coord.log" || { cat "$work/coord.log"; echo "FAIL: coordinator did not start"; exit 1; }
grep -q "mutual TLS, join token required, submit token required" "$work/coord.log" ||
  { cat "$work/coord.log"; echo "FAIL: the example does not run mutual TLS with both tokens"; exit 1; }
mport=$(sed -n 's|.*metrics on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$work/coord.log" | head -1)
[[ -n $mport ]] || { cat "$work/coord.log"; echo "FAIL: the coordinator did not log its metrics port"; exit 1; }
curl -sf "http://127.0.0.1:$mport/metrics" | grep -q '^ringmaster_coordinator_start_time_seconds' ||
  { echo "FAIL: no coordinator /metrics on port $mport"; exit 1; }
# A metrics address that cannot be bound (the first coordinator holds it): refused at start.
if timeout 10 "$coord" --listen 127.0.0.1:0 --db "$work/jobs2.db" --advertise "$RINGMASTER_COORDINATOR" \
  --metrics-listen "127.0.0.1:$mport" ${RINGMASTER_COORDINATOR_ARGS//\/etc\/ringmaster\/tls/$work/tls} \
  2>"$work/coord2.log"; then
  echo "FAIL: a coordinator whose metrics address is taken started"; exit 1
fi
grep -q -- "--metrics-listen" "$work/coord2.log" || { cat "$work/coord2.log"; echo "FAIL: no --metrics-listen error"; exit 1; }
kill -TERM $cpid; wait $cpid || { echo "FAIL: coordinator exit status $?"; exit 1; }

# ringmaster-trainer-launch: a fake trainer beside it prints its environment and arguments.
mkdir "$work/bin"
cp "$ROOT/scripts/trainer-launch.sh" "$work/bin/ringmaster-trainer-launch"
printf '#!/bin/sh\necho "args=$*"\nenv\n' >"$work/bin/ringmaster-trainer"
chmod +x "$work/bin/ringmaster-trainer" "$work/bin/ringmaster-trainer-launch"
printf '# comment\n\nNCCL_SOCKET_IFNAME=ib0\nRANK=99\nWEIRD=a b $HOME "q"\n' >"$work/trainer.env"
out=$(env -i PATH=/usr/bin:/bin RANK=3 RINGMASTER_TRAINER_ENV_FILE="$work/trainer.env" \
  "$work/bin/ringmaster-trainer-launch" train --config job.yaml)
grep -qx "args=train --config job.yaml" <<<"$out"
grep -qx "NCCL_SOCKET_IFNAME=ib0" <<<"$out"
grep -qx "RANK=3" <<<"$out" || { echo "FAIL: trainer.env overrode RANK"; exit 1; }
grep -qxF 'WEIRD=a b $HOME "q"' <<<"$out" || { echo "FAIL: value not taken literally"; exit 1; }
out=$(env -i PATH=/usr/bin:/bin RINGMASTER_TRAINER_ENV_FILE=/nonexistent "$work/bin/ringmaster-trainer-launch" x)
grep -qx "args=x" <<<"$out"   # no file: the trainer starts all the same
printf 'lower=1\n' >"$work/bad.env"
if env -i PATH=/usr/bin:/bin RINGMASTER_TRAINER_ENV_FILE="$work/bad.env" "$work/bin/ringmaster-trainer-launch" 2>/dev/null; then
  echo "FAIL: a malformed trainer.env was accepted"; exit 1
fi
# The example trainer.env parses.
out=$(env -i PATH=/usr/bin:/bin RINGMASTER_TRAINER_ENV_FILE="$ROOT/deploy/systemd/trainer.env.example" \
  "$work/bin/ringmaster-trainer-launch")
grep -qx "NCCL_SOCKET_IFNAME=eth0" <<<"$out"
# The agent serves every rank's figures: trainer ports scraped as well would count them twice.
if grep -q "^RINGMASTER_METRICS_PORT=" <<<"$out"; then echo "FAIL: trainer.env.example sets RINGMASTER_METRICS_PORT"; exit 1; fi
echo "deploy_systemd: 1 passed, 0 failed"
