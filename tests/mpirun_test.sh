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
# No process binding: oversubscribed ranks must be free to share cores with each other. No
# cross-memory attach: containers often forbid it (ptrace), and the messages here are small.
exec mpirun "${extra[@]}" --oversubscribe --bind-to none \
  --mca btl_vader_single_copy_mechanism none -np "$np" "$@"
