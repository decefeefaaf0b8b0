#!/usr/bin/env bash
# A one-node Slurm on this host, for the tests (../shared/SLURM.md): munged, slurmctld and slurmd with a
# generated slurm.conf. Needs root and Debian's `slurm-wlm` and `munge`; idempotent (a cluster that already
# answers is left as it is). Prints `slurm: ok` when sbatch is accepted, else why not, and exits non-zero.
set -euo pipefail

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "slurm: slurm-wlm and munge are not installed (apt-get install -y slurm-wlm munge)" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "slurm: starting the daemons needs root" >&2
  exit 1
fi
if timeout 10 sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mixed|alloc'; then
  echo "slurm: ok (already running)"
  exit 0
fi

state=/tmp/loratui-slurm
mkdir -p "$state"/{ctld,spool,log} /etc/slurm /run/munge /var/lib/munge /var/log/munge
host=$(hostname -s)
cpus=$(nproc)
# RealMemory below the machine's (MiB), so the node is never drained for having less than declared.
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))

if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0400 /etc/munge/munge.key
pgrep -u munge -x munged >/dev/null || runuser -u munge -- munged

# Memory limits (--mem) through the memory cgroup where cgroup v1 is mounted, so a job over its limit ends
# OUT_OF_MEMORY as on a real cluster; elsewhere no cgroup setup (limits are then not enforced).
task=task/none proctrack=proctrack/linuxproc
if [ -w /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/freezer ]; then
  # and processes tracked by cgroup, as on real clusters (linuxproc loses those whose parent exited)
  task=task/cgroup proctrack=proctrack/cgroup
  printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n' \
    > /etc/slurm/cgroup.conf
fi

cat > /etc/slurm/slurm.conf <<CONF
ClusterName=loratui
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=$proctrack
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=4096
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ReturnToService=2
MinJobAge=600
KillWait=30
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=1
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd

for _ in $(seq 60); do
  if timeout 10 sinfo -h -o '%T' 2>/dev/null | grep -qE 'idle|mixed|alloc'; then
    echo "slurm: ok ($host, $cpus CPUs, ${mem} MiB)"
    exit 0
  fi
  sleep 1
done
echo "slurm: the node did not come up; see $state/log/" >&2
sinfo >&2 || true
exit 1
