// Stopping a training job cleanly on a signal: SIGTERM (scancel, a scheduler), SIGINT (Ctrl-C)
// or SIGUSR1 (Slurm's warning before preemption, when asked for with --signal). A rank that
// gets one only records it; at the end of each step the ranks agree (an all-reduce), so all of
// them stop after the same step, save and exit 0. A SIGINT more than a second after the first
// signal ends the rank at once (Ctrl-C again; Ctrl-C reaches a rank twice within milliseconds:
// from the terminal and forwarded by zt's launcher). A repeated SIGTERM or SIGUSR1 does not: a
// scheduler sends SIGTERM again when its grace time ends (Slurm's preemption and time limit),
// then SIGKILL only KillWait later, time the save in progress may still need.
// A task that has nothing to save (an evaluation, sampling, an export) catches them too, and
// stops where it checks (between batches, forwards or tensors) by throwing StoppedBySignal: the
// destructors on the way remove what it made (an offload tier's files, an export's temporary
// file), which the signal's default action left behind.
// Thread safety: catch_stop_signals once per process; agreed_stop_signal from the thread that runs
// the job's collectives; stop_signal_received from any thread.
#pragma once

#include <stdexcept>
#include <string>

#include "zt/communicator.h"

namespace zt::trainer {

// Installs the handlers for SIGTERM, SIGINT and SIGUSR1.
void catch_stop_signals();
// A file the process removes as a second Ctrl-C ends it at once, where the destructors that
// would remove it do not run (an export's temporary file, GBs of a model cut short); one at a
// time, "" for none. Not called from a signal handler.
void remove_on_hard_stop(const std::string& path);
// Collective over `comm`: the signal any rank got so far (0: none), the same on every rank.
int agreed_stop_signal(Communicator& comm);
// The stop signal this process got so far (0: none).
int stop_signal_received();
// "SIGINT", "SIGTERM", ...; "signal N" for one without a short name.
std::string stop_signal_name(int sig);

// How a StoppedBySignal's line begins: the launcher adds no error line to ranks that said it.
inline constexpr const char* kStoppedByPrefix = "stopped by ";

// Thrown where a task with nothing to save stops on a signal; main prints what() ("stopped by
// SIGINT: trainer eval stopped after 3 of 250 forward passes; no result written") and ends the
// process with 128 + signal(), the shell's code for a death by that signal.
class StoppedBySignal : public std::runtime_error {
 public:
  //   sig:  the signal (SIGINT, SIGTERM, SIGUSR1).
  //   what: what was stopped and what was left ("trainer eval stopped after ...").
  StoppedBySignal(int sig, const std::string& what);
  int signal() const { return signal_; }

 private:
  int signal_;
};

}  // namespace zt::trainer
