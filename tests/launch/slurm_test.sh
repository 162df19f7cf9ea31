#!/usr/bin/env bash
# Starts a one-node Slurm cluster of its own (slurmctld and slurmd in the foreground, all state in
# a temporary directory, auth/none, random ports), then runs the tools under plain srun with no
# MASTER_ADDR, MASTER_PORT or WEFT_ID_FILE: the tasks rendezvous on the step's first node at the
# port derived from the job and step ids.
#   slurm_test.sh ALL_REDUCE_PERF ENV_ALLREDUCE
# Exits 77 (skipped) where Slurm is not installed or cannot start here.
set -uo pipefail
perf="$1" envprog="$2"

skip() {
  echo "SKIPPED: $*"
  exit 77
}
for tool in slurmctld slurmd srun scontrol sinfo; do
  command -v "$tool" >/dev/null || skip "$tool not found (Debian: apt-get install slurm-wlm)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root here"
auth_none="$(ls /usr/lib/*/slurm-wlm/auth_none.so /usr/lib*/slurm/auth_none.so 2>/dev/null | head -1)"
[ -n "$auth_none" ] || skip "Slurm's auth/none plugin (auth_none.so) is not installed"

dir="$(mktemp -d /tmp/weft-slurm.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir"/{state,spool,log}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Job ids start at a random point so that concurrent runs of this test, whose clusters share the
# machine, derive different rendezvous ports.
first_job=$((1000 + (RANDOM * 32768 + RANDOM) % 1000000))
cpus=$(($(nproc) > 4 ? $(nproc) : 4)) # claims 4 CPUs on smaller machines so that srun -n 4 fits
cat >"$dir/slurm.conf" <<CONF
ClusterName=weft$$
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
FirstJobId=$first_job
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=30
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF="$dir/slurm.conf"

show_logs() {
  for f in "$dir"/log/*; do
    echo "--- $f"
    tail -20 "$f"
  done
}
# Polls `cmd` every 0.1 s for up to `seconds`.
await() {
  local seconds="$1"
  shift
  for ((i = 0; i < seconds * 10; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
node_idle() { sinfo -h -n localhost -o %t | grep -q '^idle'; }

slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
if ! await 20 scontrol ping; then
  show_logs
  skip "slurmctld did not answer within 20 s"
fi
slurmd -D -f "$SLURM_CONF" -N localhost >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)
if ! await 20 node_idle; then
  show_logs
  skip "slurmd's node did not become idle within 20 s"
fi
echo "Slurm up: $(sinfo -h -o '%P %D %t %c CPUs')"

# Nothing but srun's own variables tells the tasks where to meet.
unset MASTER_ADDR MASTER_PORT WEFT_MASTER_ADDR WEFT_MASTER_PORT WEFT_ID_FILE RANK WORLD_SIZE \
  LOCAL_RANK WEFT_RANK WEFT_WORLD_SIZE WEFT_LOCAL_RANK WEFT_JOB_SECRET OMPI_COMM_WORLD_RANK \
  OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE

failures=0
# run NAME EXPECTED_MATCHES PATTERN srun-args...
run() {
  local name="$1" want="$2" pattern="$3"
  shift 3
  local log="$dir/log/$name.txt"
  timeout 90 srun --mpi="${mpi:-none}" "$@" >"$log" 2>&1
  local rc=$?
  local found
  found="$(grep -cE "$pattern" "$log")"
  if [ "$rc" = 0 ] && [ "$found" = "$want" ]; then
    echo "PASS $name"
  else
    echo "FAIL $name (exit $rc, '$pattern' found $found times, expected $want):"
    cat "$log"
    failures=$((failures + 1))
  fi
}
ok="Out of bounds values : 0 OK"
run perf_n4 1 "$ok" -n 4 "$perf" -b 8 -e 64K -f 4 -n 5 -w 1 -c 1 -T 60
run perf_n2_t2 1 "$ok" -n 2 "$perf" -b 8 -e 64K -f 4 -n 5 -w 1 -c 1 -t 2 -T 60
run env_allreduce_n2 2 "passed$" -n 2 "$envprog"
run env_allreduce_n4 4 "passed$" -n 4 "$envprog"
# The address and port came from the step, as every rank logs.
run env_allreduce_derived 2 "root [^ ]+:6[1-4][0-9]{3} \(SLURM_STEP_NODELIST, SLURM_JOB_ID.SLURM_STEP_ID\)" \
  -n 2 --export=ALL,NCCL_DEBUG=INFO,NCCL_DEBUG_SUBSYS=INIT "$envprog"
# With PMIx, tools built with MPI share the id with MPI_Bcast instead (and the others still
# derive it from the step).
if srun --mpi=list 2>&1 | grep -q pmix; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpi=pmix run perf_pmix_n2 1 "$ok" -n 2 "$perf" -b 8 -e 64K -f 4 -n 5 -w 1 -c 1 -T 60
fi
if [ "$failures" != 0 ]; then
  show_logs
  exit 1
fi
echo "Slurm launches passed"
