// Slurm's job environment as a rendezvous: the hosts of SLURM_JOB_NODELIST in Slurm's hostlist
// syntax ("gpu[01-04,07],login1" is gpu01 gpu02 gpu03 gpu04 gpu07 login1), and the port a job
// derives from SLURM_JOB_ID, so that `srun trainer ...` in an sbatch script needs no
// MASTER_ADDR/MASTER_PORT (discover_rank_env uses both; docs/cluster.md).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zt/api.h"

namespace zt {

// Every host `list` names, in Slurm's order (`scontrol show hostnames` prints the same): hosts
// separated by commas; a bracket holds numbers and ranges ("01-04,07"), each zero-padded to the
// width its first number is written with; several brackets in one name combine, the first
// varying slowest ("a[1-2]b[3-4]" is a1b3 a1b4 a2b3 a2b4). Throws ConfigError naming `variable`
// and what is wrong, as Slurm refuses it: an unbalanced bracket, an empty or descending range, a
// bracket that holds other than digits, text after a name's last bracket, or more than `limit`
// hosts.
ZT_API std::vector<std::string> expand_slurm_hostlist(const std::string& list,
                                                      const std::string& variable,
                                                      size_t limit = size_t{1} << 20);

// The rendezvous port of a launcher's job `job_id` (Slurm's SLURM_JOB_ID, Open MPI's job
// family): 15000 plus its last four decimal digits, so the port is fixed for the job and its
// requeues, below Linux's ephemeral range (32768 on). Two ids that end alike collide: jobs
// sharing a host, or (Slurm passes job + 997 x step) one job's step and another's, such as job
// 1000's step 1 and job 1997's step 0; set MASTER_PORT there.
ZT_API int job_rendezvous_port(int64_t job_id);

}  // namespace zt
