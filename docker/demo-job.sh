#!/bin/sh
# The demo job: two ranks of the NCCL stand-in on two nodes, one of them warning, with trace
# capture. Submit from the controller: docker compose exec slurmctld sbatch --trace-capture=INFO /usr/local/sbin/demo-job.sh
#SBATCH -N 2
#SBATCH -n 2
#SBATCH -o /var/log/slurm/demo-%j.out
srun -N2 -n2 /usr/local/bin/fake-nccl --warn "NET/IB : Got completion from peer with status=12"
