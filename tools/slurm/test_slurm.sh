#!/usr/bin/env bash
# make test-slurm: prove the cluster path on this machine. A throwaway single-node Slurm cluster (slurmctld + slurmd
# + munged, no accounting database) runs a few cheap figures through `--profile profiles/slurm`; the same targets are
# built locally (--cores 2) in a second copy; every figure table (results/**/<figure>.csv) must be byte-identical.
#
# Needs a Debian-like machine where you may install packages: root, or sudo (the script re-runs itself under
# `sudo -E`). Installs `slurm-wlm` and `munge` with apt-get when slurmctld/slurmd/sbatch/munged are missing (and leaves
# them installed). Nothing of the system's Slurm or munge setup is used or touched: the munge key, slurm.conf, state,
# spool, logs and sockets all live in a temp dir, the daemons listen on free high ports and run as root
# (SlurmUser=root: fine for a throwaway cluster, and it works in containers), and they are stopped by their process
# ids on exit, failure and Ctrl-C included. The working tree's results/, data/ and .snakemake/ are not touched: both
# builds run in temp copies of the tree (tracked + untracked, non-ignored files), with the project's .venv.
#
# Prints: the node, the sbatch jobs submitted (counted in slurmctld's log, by rule from the Snakemake log), which
# jobs ran locally (localrules), the wall time of both builds and the table comparison. Exit status 0 = all passed.
#
# Environment (all optional):
#   SLURM_TEST_ONLY      figures to build, the `only` config list   (default: asoodeh2021/fig2, kato2024/fig2, lowy2023/fig6)
#   SLURM_TEST_SCALE     smoke | quick | paper                       (default: quick)
#   SLURM_TEST_TARGETS   Snakemake targets                           (default: all = tables, plots, claims, report)
#   SLURM_TEST_CORES     cores of the local reference build          (default: 2)
#   SLURM_TEST_SOURCE    worktree (the tree as it is, uncommitted edits included) | head (git archive HEAD)
#                                                                    (default: worktree)
#   SLURM_TEST_STATUS_INTERVAL  seconds between the executor's squeue polls (--slurm-init-seconds-before-status-checks;
#                                                                    default: 10; the plugin's own default is 40)
#   SLURM_TEST_TIMEOUT   seconds before the cluster build is declared hung and stopped (default: 3600)
#   SLURM_TEST_TMPDIR    where the temp dir goes                     (default: $TMPDIR or /tmp)
#   SLURM_TEST_KEEP      1: keep the temp dir (copies, logs) even after a pass (it is always kept after a failure)
#   SNAKEMAKE_EXTRA      extra arguments for both builds, e.g. "--config data_source=standin"
#   DPFL_DATA_MIRROR     passed through: the offline dataset copies (else stand-ins, which are deterministic too)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

if [[ $EUID -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        echo "test-slurm: not root; re-running under sudo -E (apt-get and the Slurm daemons need root)"
        exec sudo -E env "PATH=$PATH" bash "${BASH_SOURCE[0]}" "$@"
    fi
    echo "test-slurm: needs root or sudo (apt-get install slurm-wlm munge, daemons running as root)" >&2
    exit 2
fi

ONLY=${SLURM_TEST_ONLY:-asoodeh2021/fig2, kato2024/fig2, lowy2023/fig6}
SCALE=${SLURM_TEST_SCALE:-quick}
read -r -a TARGETS <<<"${SLURM_TEST_TARGETS:-all}"
LOCAL_CORES=${SLURM_TEST_CORES:-2}
SOURCE=${SLURM_TEST_SOURCE:-worktree}
INTERVAL=${SLURM_TEST_STATUS_INTERVAL:-10}
RUN_TIMEOUT=${SLURM_TEST_TIMEOUT:-3600}
read -r -a EXTRA <<<"${SNAKEMAKE_EXTRA:-}"
SNAKEMAKE="$REPO/.venv/bin/snakemake"
PY="$REPO/.venv/bin/python"
PARTITION=dpfl
# Rules that may go to the scheduler; everything else must be a localrule (workflow/rules/*.smk).
COMPUTE_RULES="prepare allocate figure_cell"

log() { printf '[test-slurm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "FAILED: $*" >&2; exit 1; }

[[ -x $SNAKEMAKE ]] || die "$SNAKEMAKE missing: run 'make install' first"

# --- 1. packages ------------------------------------------------------------------------------------------------------
missing=()
for tool in slurmctld slurmd sbatch squeue sinfo scontrol scancel munged; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get: install Slurm and munge yourself"
    log "installing slurm-wlm and munge with apt-get (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null
fi

# --- 2. temp dir, teardown --------------------------------------------------------------------------------------------
BASE=${SLURM_TEST_TMPDIR:-${TMPDIR:-/tmp}}
T=$(mktemp -d "$BASE/dpfl-slurm-test.XXXXXX")
chmod 755 "$T"
mkdir -p "$T"/{munge,etc,state,spool,log,run}
chmod 755 "$T/munge"
PIDS=()       # daemons we started, stopped in reverse order
STATUS=fail

teardown() {
    local rc=$?
    set +e
    if [[ -n ${SLURM_CONF:-} ]] && ((${#PIDS[@]})); then
        # jobs still queued or running on our cluster (a hung or interrupted build): cancel them before slurmd goes
        local left
        left=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
        if [[ -n ${left// /} ]]; then
            log "cancelling leftover jobs: $left"
            # shellcheck disable=SC2086
            scancel $left 2>/dev/null
            for _ in $(seq 30); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 1; done
        fi
    fi
    local i pid
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pid=${PIDS[i]}
        kill -0 "$pid" 2>/dev/null || continue
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    ((${#PIDS[@]})) && log "stopped daemons (pids ${PIDS[*]})"
    if [[ $STATUS == pass && ${SLURM_TEST_KEEP:-0} != 1 ]]; then
        rm -rf "$T"
    else
        log "kept $T (logs: $T/log, $T/slurm.log, $T/local.log)"
    fi
    exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- 3. munge (throwaway key, own socket) -----------------------------------------------------------------------------
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
MUNGE_SOCKET="$T/munge/munge.socket"
# --force: run as root and over a stale socket; -F: stay in the foreground, so $! is the daemon's pid
munged -F --force --key-file="$T/munge/munge.key" --socket="$MUNGE_SOCKET" --pid-file="$T/munge/munged.pid" \
    --log-file="$T/log/munged.log" --seed-file="$T/munge/munged.seed" >>"$T/log/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do [[ -S $MUNGE_SOCKET ]] && break; sleep 0.2; done
munge -S "$MUNGE_SOCKET" -n </dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null \
    || { tail -n 20 "$T/log/munged.log" "$T/log/munged.out" 2>/dev/null; die "munged does not answer"; }

# --- 4. slurm.conf sized to this machine ------------------------------------------------------------------------------
HOST=$(hostname -s)
NODE_LINE=$(slurmd -C 2>/dev/null | head -n 1)
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$NODE_LINE"; }
CPUS=$(field CPUs); CPUS=${CPUS:-$(nproc)}
MEM=$(field RealMemory); MEM=${MEM:-$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)}
MEM=$((MEM * 95 / 100))   # below what slurmd measures, or the node is drained for "Low RealMemory"
read -r CTLD_PORT SLURMD_PORT < <("$PY" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

export SLURM_CONF="$T/etc/slurm.conf"
cat >"$SLURM_CONF" <<EOF
# Throwaway single-node cluster of tools/slurm/test_slurm.sh: no accounting database, no cgroups.
ClusterName=dpfltest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/run/slurmctld.pid
SlurmdPidFile=$T/run/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# finished jobs stay visible to squeue for 10 minutes: the executor's squeue status polls must still see them
MinJobAge=600
NodeName=$HOST NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

SLURM_VERSION=$(sinfo --version 2>/dev/null || echo "slurm ?")
# Inside a job, the jobstep executor (snakemake-executor-plugin-slurm-jobstep) runs the rule through `srun` with every
# SLURM_* variable removed but a few job ids, SLURM_CONF included; srun then finds no configuration (it is not in
# /etc/slurm, and there is no DNS SRV record). A wrapper first on PATH (sbatch passes PATH on: --export=ALL) puts it
# back. Clusters with their slurm.conf in the standard place need nothing of the kind.
mkdir -p "$T/bin"
printf '#!/bin/sh\nSLURM_CONF=%q exec %q "$@"\n' "$SLURM_CONF" "$(command -v srun)" >"$T/bin/srun"
chmod 755 "$T/bin/srun"
export PATH="$T/bin:$PATH"

# --- 5. daemons -------------------------------------------------------------------------------------------------------
# -D: foreground, so $! is the daemon itself; -i: ignore state files (there are none; fresh each run)
slurmctld -D -i -f "$SLURM_CONF" >>"$T/log/slurmctld.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do scontrol ping >/dev/null 2>&1 && break; sleep 0.2; done
slurmd -D -f "$SLURM_CONF" >>"$T/log/slurmd.out" 2>&1 &
PIDS+=($!)
log "munged, slurmctld, slurmd started (pids ${PIDS[*]}; ports $CTLD_PORT/$SLURMD_PORT; $SLURM_VERSION)"

state=""
for i in $(seq 120); do
    for pid in "${PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null || { tail -n 30 "$T"/log/*.log "$T"/log/*.out 2>/dev/null; die "daemon $pid exited"; }
    done
    state=$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null | head -n 1)
    [[ $state == idle ]] && break
    if ((i == 20)) && [[ $state == down* || $state == drain* ]]; then
        scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true
    fi
    sleep 0.5
done
[[ $state == idle ]] || { tail -n 30 "$T"/log/*.log 2>/dev/null; die "node $HOST not idle after 60 s (state: '${state:-none}')"; }
log "node $HOST idle: CPUs=$CPUS RealMemory=${MEM} MB, partition $PARTITION"

# --- 6. two copies of the project -------------------------------------------------------------------------------------
snapshot() {
    local dest=$1
    mkdir -p "$dest"
    if [[ $SOURCE == head ]]; then
        git -C "$REPO" archive HEAD | tar -x -C "$dest"
    else
        # tracked + untracked files that git does not ignore (results/, data/, .venv/ are ignored); skip deleted ones
        (cd "$REPO" && git ls-files -z -co --exclude-standard \
            | while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done \
            | tar --null -T - -cf -) | tar -x -C "$dest"
    fi
}
snapshot "$T/slurm"
snapshot "$T/local"
CONFIG=(--config "scale=$SCALE" "only=[$ONLY]")
log "copies of the project ($SOURCE) in $T/{slurm,local}; targets: ${TARGETS[*]} with only=[$ONLY] scale=$SCALE"

# --- 7. the cluster build -----------------------------------------------------------------------------------------------
# --workflow-profile none: otherwise profiles/default (the local profile: cores 2, its default-resources) is layered
# over profiles/slurm. No slurm_account: without an accounting database the plugin cannot validate one (sacctmgr).
log "cluster build: snakemake --profile profiles/slurm --slurm-status-command squeue ..."
t0=$(date +%s)
set +e
(cd "$T/slurm" && timeout --signal=INT --kill-after=60 "$RUN_TIMEOUT" "$SNAKEMAKE" \
    --workflow-profile none --profile profiles/slurm \
    --slurm-status-command squeue --slurm-init-seconds-before-status-checks "$INTERVAL" \
    --default-resources mem_mb=2000 runtime=30 "slurm_partition=$PARTITION" \
    "${CONFIG[@]}" "${EXTRA[@]}" -- "${TARGETS[@]}") >"$T/slurm.log" 2>&1
rc=$?
set -e
SLURM_WALL=$(($(date +%s) - t0))
if ((rc != 0)); then
    tail -n 40 "$T/slurm.log"
    ((rc == 124 || rc == 130)) && die "cluster build did not finish within ${RUN_TIMEOUT} s (hung?)"
    die "cluster build failed (exit $rc), log: $T/slurm.log"
fi
log "cluster build done in ${SLURM_WALL} s"

SUBMITTED=$(grep -c '_slurm_rpc_submit_batch_job: JobId=' "$T/log/slurmctld.log" || true)
# Snakemake prints "rule X:" for a job it submits and "localrule X:" for one it runs here
submitted_rules=$(grep -oE '^rule [A-Za-z0-9_]+:' "$T/slurm.log" | sed 's/^rule //; s/:$//' | sort | uniq -c || true)
local_rules=$(grep -oE '^localrule [A-Za-z0-9_]+:' "$T/slurm.log" | sed 's/^localrule //; s/:$//' | sort | uniq -c || true)
SNAKEMAKE_SUBMITTED=$(grep -c 'has been submitted with SLURM jobid' "$T/slurm.log" || true)
squeue_view=$(squeue -h --states=all -o '%i %T %k' 2>/dev/null | sort -n || true)
not_ok=$(awk '$2 != "COMPLETED"' <<<"$squeue_view" | sed '/^$/d' || true)

# --- 8. the local reference build ---------------------------------------------------------------------------------------
log "local build: snakemake --cores $LOCAL_CORES ..."
t0=$(date +%s)
set +e
(cd "$T/local" && "$SNAKEMAKE" --cores "$LOCAL_CORES" "${CONFIG[@]}" "${EXTRA[@]}" -- "${TARGETS[@]}") >"$T/local.log" 2>&1
rc=$?
set -e
LOCAL_WALL=$(($(date +%s) - t0))
((rc == 0)) || { tail -n 40 "$T/local.log"; die "local build failed (exit $rc), log: $T/local.log"; }
log "local build done in ${LOCAL_WALL} s"

# --- 9. compare ---------------------------------------------------------------------------------------------------------
tables() { (cd "$1" && find results -type f -name '*.csv' -not -path 'results/logs/*' -not -path 'results/report/*' | sort); }
cells() { (cd "$1" && find results -type f -path '*/cells/*.parquet' | sort); }
slurm_tables=$(tables "$T/slurm"); local_tables=$(tables "$T/local")
n_tables=$(sed '/^$/d' <<<"$slurm_tables" | wc -l)
problems=()
[[ $slurm_tables == "$local_tables" ]] || problems+=("different table sets: $(diff <(echo "$slurm_tables") <(echo "$local_tables") | grep '^[<>]' | tr '\n' ' ')")
((n_tables > 0)) || problems+=("no figure table was built")
identical=0
comparison=""
while IFS= read -r f; do
    [[ -n $f ]] || continue
    if [[ -f $T/local/$f ]] && cmp -s "$T/slurm/$f" "$T/local/$f"; then
        identical=$((identical + 1))
        comparison+="  identical  $(sha256sum "$T/slurm/$f" | cut -c1-16)  $f"$'\n'
    else
        problems+=("$f differs")
        comparison+="  DIFFERENT                    $f"$'\n'
    fi
done <<<"$slurm_tables"
# cell tables: compared for information (they record each cell's own run time, so bytes may differ)
n_cells=0; same_cells=0
while IFS= read -r f; do
    [[ -n $f ]] || continue
    n_cells=$((n_cells + 1))
    [[ -f $T/local/$f ]] && cmp -s "$T/slurm/$f" "$T/local/$f" && same_cells=$((same_cells + 1))
done <<<"$(cells "$T/slurm")"

bad_rules=""
while read -r _ rule; do
    [[ -n ${rule:-} ]] || continue
    [[ " $COMPUTE_RULES " == *" $rule "* ]] || bad_rules+="$rule "
done <<<"$submitted_rules"
[[ -z $bad_rules ]] || problems+=("light rules were submitted to Slurm (not in localrules): $bad_rules")
((SUBMITTED == SNAKEMAKE_SUBMITTED)) || problems+=("slurmctld saw $SUBMITTED submissions, Snakemake reports $SNAKEMAKE_SUBMITTED")
[[ -z $not_ok ]] || problems+=("jobs not COMPLETED: $(tr '\n' ';' <<<"$not_ok")")

# --- 10. report ---------------------------------------------------------------------------------------------------------
echo
echo "== make test-slurm =================================================================================="
echo "cluster:    $SLURM_VERSION, one node $HOST (CPUs=$CPUS, RealMemory=$MEM MB), partition $PARTITION,"
echo "            no accounting database; executor status via squeue (poll interval ${INTERVAL} s)"
echo "build:      targets ${TARGETS[*]}, only=[$ONLY], scale=$SCALE, source=$SOURCE, DPFL_DATA_MIRROR=${DPFL_DATA_MIRROR:-unset}"
echo "sbatch jobs submitted: $SUBMITTED (slurmctld log; Snakemake: $SNAKEMAKE_SUBMITTED), by rule:"
sed '/^$/d; s/^ */  /' <<<"$submitted_rules"
echo "jobs run on the submitting node (localrules):"
sed '/^$/d; s/^ */  /' <<<"${local_rules:-  none}"
echo "slurm job states: $(awk '{print $2}' <<<"$squeue_view" | sed '/^$/d' | sort | uniq -c | awk '{printf "%s %s  ", $1, $2}')"
echo "wall time:  cluster build ${SLURM_WALL} s, local build (--cores $LOCAL_CORES) ${LOCAL_WALL} s"
echo "tables:     $identical of $n_tables figure tables byte-identical (cluster vs local):"
printf '%s' "$comparison"
echo "cell tables: $same_cells of $n_cells byte-identical (informational: a cell table may record its own run time)"
if ((${#problems[@]})); then
    printf '  problem: %s\n' "${problems[@]}"
    echo "RESULT: FAIL"
    exit 1
fi
echo "RESULT: PASS"
STATUS=pass
