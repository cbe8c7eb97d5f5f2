#!/usr/bin/env bash
# Runs a test program as N rank processes: tests/mpirun_test.sh N PROGRAM [ARGS...].
# Exits 77 (ctest: skipped) with the reason when Open MPI's mpirun is not installed; CI installs it
# (scripts/setup). As root (CI), mpirun needs --allow-run-as-root; --oversubscribe lets 4 ranks
# run on a 2-core machine.
set -euo pipefail
np=$1
shift
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
fi
extra=()
[ "$(id -u)" -ne 0 ] || extra+=(--allow-run-as-root)
# Each mpirun gets a session directory of its own (TMPDIR): two starting at once both create
# $TMPDIR/ompi.HOST.UID, and the one that loses fails with "mkdir: File exists" (seen once at
# tst_engine_server's start, which launches two engines back to back, beside tst_cli under ctest
# -j2). So mpirun runs as a child, and a signal to this script (the suites stop engines with
# SIGTERM) goes on to it before the directory goes.
session=$(mktemp -d "${TMPDIR:-/tmp}/shardscope-mpirun.XXXXXX")
# No process binding: oversubscribed ranks must be free to share cores with each other. No
# cross-memory attach: containers often forbid it (ptrace), and the messages here are small.
TMPDIR=$session mpirun "${extra[@]}" --oversubscribe --bind-to none \
  --mca btl_vader_single_copy_mechanism none -np "$np" "$@" &
child=$!
stop() {
  kill -"$1" "$child" 2>/dev/null || true
  wait "$child" 2>/dev/null || true
  rm -rf "$session"
  exit "$2"
}
trap 'stop TERM 143' TERM
trap 'stop INT 130' INT
rc=0
wait "$child" || rc=$?
rm -rf "$session"
exit "$rc"
