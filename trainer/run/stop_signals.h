// Stopping a training job cleanly on a signal: SIGTERM (scancel, a scheduler), SIGINT (Ctrl-C)
// or SIGUSR1 (Slurm's warning before preemption, when asked for with --signal). A rank that
// gets one only records it; at the end of each step the ranks agree (an all-reduce), so all of
// them stop after the same step, save and exit 0. A SIGINT more than a second after the first
// signal ends the rank at once (Ctrl-C again; Ctrl-C reaches a rank twice within milliseconds:
// from the terminal and forwarded by zt's launcher). A repeated SIGTERM or SIGUSR1 does not: a
// scheduler sends SIGTERM again when its grace time ends (Slurm's preemption and time limit),
// then SIGKILL only KillWait later, time the save in progress may still need.
// Thread safety: catch_stop_signals once per process; agreed_stop_signal from the training thread.
#pragma once

#include "zt/communicator.h"

namespace zt::trainer {

// Installs the handlers for SIGTERM, SIGINT and SIGUSR1.
void catch_stop_signals();
// Collective over `comm`: the signal any rank got so far (0: none), the same on every rank.
int agreed_stop_signal(Communicator& comm);

}  // namespace zt::trainer
